package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/idemgate/idemgate/store"
)

// ErrFailed is matched by the *FailedError that Lock returns when the
// key's record is FAILED: the work does not run again until an operator
// retries the key (idemgate retry) or the record expires.
var ErrFailed = errors.New("gateway: failed: the work for this key failed for good")

// FailedError reports that Key's record is FAILED: an earlier delivery's
// work failed for good. errors.Is(err, ErrFailed) is true for it.
type FailedError struct {
	Key string
	// Reason is why the work failed, as the record keeps it.
	Reason string
	// Attempts is how many attempts failed.
	Attempts int
	// FailedBy names the delivery whose failure made the record FAILED
	// (WithOrigin); empty when the record keeps none.
	FailedBy string
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("gateway: failed: key %q failed for good after %d attempts (%s); retry it with idemgate retry once the cause is fixed", e.Key, e.Attempts, e.Reason)
}

// Is makes errors.Is(err, ErrFailed) true.
func (e *FailedError) Is(target error) bool { return target == ErrFailed }

// Permanent marks err as a failure no retry can mend (a malformed order, a
// supplier's 4xx): work that returns it makes the key's record FAILED at
// once (see Options.MaxAttempts). errors.Is and errors.As see err through
// it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// HandlerStatus returns the status a handler wrapped by Idempotent answered
// when err is the failure it became, so that a Terminal classifier can
// judge it: a handler's 400 or 422 may mean the message can never succeed.
func HandlerStatus(err error) (int, bool) {
	se, ok := errors.AsType[statusError](err)
	return se.code, ok
}

// The reasons a record goes FAILED, as the idemgate.failures metric counts
// them.
const (
	whyPermanent = "permanent"    // the work returned Permanent(err)
	whyTerminal  = "terminal"     // the route's Terminal classifier said so
	whyAttempts  = "max_attempts" // the attempt budget is spent
)

// errPanicked is the failure counted for work that panicked (or called
// runtime.Goexit): a message that makes the work panic every time is
// poison too. The panic's value and stack are in the delivery's line.
var errPanicked = errors.New("the work panicked (its value and stack are in the delivery's ERROR line)")

// failing says whether a failure of the work with err is counted in the
// key's record rather than only released, and, when it is final, why
// (whyPermanent or whyTerminal). A lost claim (lost), a fenced-out
// transaction, contention and a consumer's shutdown are not the message's
// failure; a caller's context that ended is (docs/design.md, "Work that
// can never succeed, and copies that meet a live holder").
func (g *Gateway) failing(ctx, body context.Context, key string, err, lost error, sc scope) (count bool, final string) {
	switch {
	case err == nil || lost != nil || g.failer == nil || errors.Is(err, store.ErrFenced) || contention(err):
		return false, ""
	case contended(body):
		return false, ""
	case ctx.Err() != nil && sc.d != nil && sc.d.CancelIsShutdown:
		return false, ""
	}
	switch {
	case IsPermanent(err):
		final = whyPermanent
	case g.terminal(ctx, key, err, sc):
		final = whyTerminal
	}
	return final != "" || g.opts.MaxAttempts > 0, final
}

// contention says that err is another caller's hold on a key, not a
// failure of the work: ErrInProgress from the work's own Mutex or Lock, or
// a handler's busy answer (503 or 429).
func contention(err error) bool {
	if errors.Is(err, ErrInProgress) {
		return true
	}
	se, ok := errors.AsType[statusError](err)
	return ok && se.busy()
}

// terminal asks the Terminal classifier whether err can never succeed. A
// classifier that panics is logged and says no, so that the claim is
// still settled.
func (g *Gateway) terminal(ctx context.Context, key string, err error, sc scope) (yes bool) {
	if g.opts.Terminal != nil {
		g.observe(ctx, "Terminal", key, sc, func() { yes = g.opts.Terminal(err) })
	}
	return yes
}

// fail records c's failure with err, final (final names why) or counted,
// and reports whether the record went FAILED, and whether the claim was
// settled: if not (a store error), the caller releases it.
func (g *Gateway) fail(ctx context.Context, c store.Claim, err error, final string, sc scope) (failed, settled bool) {
	f := store.Failure{Reason: g.reason(c.Key, err), Final: final != "", MaxAttempts: g.opts.MaxAttempts}
	start := time.Now()
	sctx, stop := g.settle(ctx, start)
	attempts, failed, ferr := g.failer.Fail(sctx, c, f)
	g.tel.timed(ctx, opFail, start)
	stop()
	if ferr != nil {
		sc.logAttrs(ctx, slog.LevelWarn, "idemgate: recording the failure failed; the claim is released and the attempt not counted",
			g.keyAttr(c.Key), slog.Int64("fence", c.Fence), g.errorAttr(c.Key, ferr))
		return false, false
	}
	if failed {
		why := final
		if why == "" {
			why = whyAttempts
		}
		g.tel.failure(ctx, why, sc)
		sc.logAttrs(ctx, slog.LevelError, "idemgate: the work failed for good; the key is FAILED and its deliveries are no longer run",
			OutcomeAbandoned.attr(), g.keyAttr(c.Key), slog.Int64("fence", c.Fence), slog.String("why", why), slog.Int("attempts", attempts), g.errorAttr(c.Key, err))
	}
	return failed, attempts > 0
}

// reason is err's text as a record keeps it: one printable line, bounded,
// and without the key when the gateway hides keys.
func (g *Gateway) reason(key string, err error) string {
	return store.MakeReason(g.withoutKey(key, err.Error()))
}

// failedError is the error of a delivery that met a FAILED record.
func failedError(c store.Claim) *FailedError {
	return &FailedError{Key: c.Key, Reason: c.Reason, Attempts: c.Attempts, FailedBy: c.Origin}
}

// failure counts one record gone FAILED, by why and route: the delivery's
// path on the push surface, its event type on CloudEvents, its
// subscription on pull ("" for Lock called directly).
func (t *telemetry) failure(ctx context.Context, why string, sc scope) {
	var route string
	if d := sc.d; d != nil {
		switch {
		case d.Path != "":
			route = d.Path
		case d.EventType != "":
			route = d.EventType
		case d.Message != nil:
			route = d.Message.Subscription
		}
	}
	t.failures.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", why), attribute.String("route", route)))
}
