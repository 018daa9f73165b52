package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/idemgate/idemgate/store"
)

// logFor is the logger of d's lines: its adapter's, or else the gateway's.
func (g *Gateway) logFor(d *Delivery) *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return g.log
}

var errEmptyKey = errors.New("the key function returned an empty key")

// deliver is Deliver. Its one log line is at DEBUG when the work ran, at
// Options.DuplicateLogLevel for a duplicate, WARN for contention (a live
// holder, the work's own Mutex, a handler's 503 or 429) and unguarded
// work, ERROR otherwise; Complete's failures are logged where they happen.
// A work that calls runtime.Goexit is logged; the guard cannot return.
func (g *Gateway) deliver(ctx context.Context, d *Delivery, work func(context.Context) error) (res Result) {
	var start time.Time // for the duration of the won and duplicate lines only
	lg := g.logFor(d)
	if lg.Enabled(ctx, slog.LevelDebug) || lg.Enabled(ctx, g.opts.DuplicateLogLevel) {
		start = time.Now()
	}
	d.AcceptConflicts, d.AckFailed = g.opts.AcceptConflicts, g.opts.AckFailed
	var fp []byte
	if g.opts.Fingerprint != nil && d.Invalid == nil {
		var err error
		if fp, err = g.opts.Fingerprint(d.Message); err == nil {
			err = store.CheckFingerprint(fp)
		}
		if err != nil {
			d.Invalid = fmt.Errorf("idemgate: fingerprint: %w", err)
		}
	}
	if d.Invalid != nil {
		g.tel.outcome(ctx, OutcomeRejected)
		g.logDelivery(ctx, lg, d, slog.LevelWarn, "idemgate: rejected a request that is not a usable delivery", OutcomeRejected, slog.Any("error", d.Invalid))
		return Result{Outcome: OutcomeRejected, Err: d.Invalid}
	}
	var keyErr error
	if d.Key, keyErr = g.opts.Key(d.Message); keyErr == nil && d.Key == "" {
		keyErr = errEmptyKey
	}
	ran, returned := false, false
	defer func() {
		if p := recover(); p != nil {
			res = Result{Outcome: OutcomeFailed, Ran: ran, Panic: p}
			g.logDelivery(ctx, lg, d, slog.LevelError, "idemgate: handler panicked; the claim was released for a retry", OutcomeFailed,
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		} else if !returned {
			g.logDelivery(ctx, lg, d, slog.LevelError, "idemgate: handler exited (runtime.Goexit); the claim was released for a retry", OutcomeFailed)
		}
	}()
	body := func(ctx context.Context) error {
		ran = true
		return work(ctx)
	}
	var (
		outcome Outcome
		fence   int64
		by      string
		err     error
	)
	switch {
	case g.disabled || keyErr != nil && g.opts.AllowUnguarded:
		msg, why := "idemgate: no key; running unguarded (AllowUnguarded)", slog.Any("error", keyErr)
		if g.disabled {
			msg, why = "idemgate: guard disabled; running unguarded", slog.Attr{}
		}
		g.logDelivery(ctx, lg, d, slog.LevelWarn, msg, OutcomeUnguarded, why)
		g.tel.outcome(ctx, OutcomeUnguarded)
		outcome, err = OutcomeUnguarded, body(ctx)
	case keyErr != nil:
		g.tel.outcome(ctx, OutcomeNoKey)
		outcome, err = OutcomeNoKey, fmt.Errorf("%w: %w", ErrNoKey, keyErr)
	default:
		if len(fp) > 0 {
			ctx = WithFingerprint(ctx, fp)
		}
		// The record names the delivery that won it, unless the caller
		// named one; the body's own Locks (child keys) keep the same.
		if originOfCtx(ctx) == "" {
			ctx = WithOrigin(ctx, originOf(d))
		}
		outcome, fence, by, err = g.lock(ctx, d.Key, body, scope{log: lg, d: d})
	}
	returned = true
	res = Result{Outcome: outcome, Ran: ran, Err: err}
	g.logOutcome(ctx, lg, d, &res, fence, by, keyErr, start)
	if !ran {
		res.Err = g.hideKey(d.Key, err)
	}
	return res
}

// logOutcome writes the line of a delivery that returned. fence and by are
// the fence and origin of the claim the delivery won or met (0 and "" when
// none); cause is why no key was resolved, if none was.
func (g *Gateway) logOutcome(ctx context.Context, lg *slog.Logger, d *Delivery, res *Result, fence int64, by string, cause error, start time.Time) {
	outcome := res.Outcome
	switch {
	case outcome == OutcomeWon || outcome == OutcomeDuplicate:
		// The first question after an incident is "was X dropped as a
		// duplicate?": its line is at INFO by default
		// (Options.DuplicateLogLevel). The fence is the claim's: on a
		// duplicate, the record's, that of the delivery that did the work,
		// which done_by names (its origin), so that the message whose work
		// this one repeats is found without another read.
		level, msg := slog.LevelDebug, "idemgate: delivery processed"
		if outcome == OutcomeDuplicate {
			level, msg = g.opts.DuplicateLogLevel, "idemgate: duplicate delivery acknowledged"
		}
		if lg.Enabled(ctx, level) { // spares the attributes' cost when off
			attrs := [3]slog.Attr{slog.Int64("fence", fence), millis("duration", time.Since(start))}
			n := 2
			if outcome == OutcomeDuplicate && by != "" {
				attrs[n], n = slog.String("done_by", by), n+1
			}
			g.logDelivery(ctx, lg, d, level, msg, outcome, attrs[:n]...)
		}
	case outcome == OutcomeFencedOut, outcome == OutcomeCompleteError, outcome == OutcomeAbandoned, outcome == OutcomeUnguarded && res.Err == nil:
		// Logged where it happened.
	case outcome == OutcomeAlreadyFailed:
		// Expected until the message reaches the dead-letter topic: a
		// WARN, with what the record says of the failure.
		msg := "idemgate: the key's work failed for good earlier; not run, refused (retry it with idemgate retry)"
		if d.AckFailed {
			msg = "idemgate: the key's work failed for good earlier; not run, acknowledged (AckFailed)"
		}
		fe, _ := errors.AsType[*FailedError](res.Err)
		g.logDelivery(ctx, lg, d, slog.LevelWarn, msg, outcome, slog.Int64("fence", fence), slog.Int("attempts", fe.Attempts),
			slog.String("reason", fe.Reason), failedBy(by))
	case outcome == OutcomeInProgress:
		// Contention is healthy: a quiet WARN, no stack. The delivery
		// attempt tells how close the message is to the dead-letter topic.
		msg := "idemgate: key held by another delivery; asking for a retry"
		if ip, ok := errors.AsType[*InProgressError](res.Err); ok {
			res.LeaseUntil, by = ip.LeaseUntil, ip.HeldBy
		} else if ce, ok := errors.AsType[*ConflictError](res.Err); ok {
			// AcceptConflicts accepts only done work: the holder may yet
			// fail, or an operator retry the FAILED key, and then this
			// payload is the one to run.
			res.LeaseUntil = ce.LeaseUntil
			msg = "idemgate: key reused for a different payload while the first is in progress; asking for a retry"
			if ce.Failed {
				msg = "idemgate: key reused for a different payload while the first is FAILED; asking for a retry"
			}
		}
		if res.Ran { // the work's transaction was fenced out by a holder still at work
			msg = "idemgate: claim taken over before the work committed; nothing written, the new holder is at work; asking for a retry"
		}
		g.logDelivery(ctx, lg, d, slog.LevelWarn, msg, outcome, slog.Time("holder_lease_until", res.LeaseUntil), heldBy(by))
	case res.Ran && errors.Is(res.Err, ErrInProgress):
		// The work's own Mutex (or a Lock on another key) met a live
		// holder: contention, not a failure.
		if ip, ok := errors.AsType[*InProgressError](res.Err); ok {
			res.LeaseUntil = ip.LeaseUntil
		}
		g.logDelivery(ctx, lg, d, slog.LevelWarn, "idemgate: the handler met another caller's key; the claim was released for a retry", OutcomeFailed,
			g.errorAttr(d.Key, res.Err), slog.Time("holder_lease_until", res.LeaseUntil))
	case res.Ran:
		level, msg := slog.LevelError, "idemgate: handler failed; the claim was released for a retry"
		attrs := []slog.Attr{g.errorAttr(d.Key, res.Err)}
		if se, ok := errors.AsType[statusError](res.Err); ok {
			if se.busy() { // the handler's own contention, like the gateway's in-progress answer
				level, msg = slog.LevelWarn, "idemgate: handler answered busy (503 or 429); the claim was released for a retry"
			}
			if len(se.body) > 0 {
				attrs = append(attrs, slog.String("handler_body", g.bodyText(d.Key, se.body)))
			}
		}
		g.logDelivery(ctx, lg, d, level, msg, OutcomeFailed, attrs...)
	case outcome == OutcomeConflict:
		msg := "idemgate: key reused for a different payload; refusing it"
		if d.AcceptConflicts {
			msg = "idemgate: key reused for a different payload; acknowledged as a duplicate (AcceptConflicts)"
		}
		ce, _ := res.Err.(*ConflictError)
		g.logDelivery(ctx, lg, d, slog.LevelError, msg, outcome, slog.String("stored_fingerprint", shortFingerprint(ce.Stored)),
			slog.String("fingerprint", shortFingerprint(ce.Got)), slog.Bool("done", ce.Done))
	case outcome == OutcomeNoKey:
		if cause == nil { // the store refused the key
			cause = res.Err
		}
		g.logDelivery(ctx, lg, d, slog.LevelError, "idemgate: no idempotency key; refusing to run unguarded", outcome, g.errorAttr(d.Key, cause))
	case outcome == OutcomeCancelled:
		// The caller went away (a client gone, a deadline, Receive
		// stopping): nothing is wrong with the store.
		g.logDelivery(ctx, lg, d, slog.LevelWarn, "idemgate: the caller's context ended before the key was claimed; asking for a retry", outcome, g.errorAttr(d.Key, res.Err))
	default:
		g.logDelivery(ctx, lg, d, slog.LevelError, "idemgate: store failed; asking for a retry", outcome, g.errorAttr(d.Key, res.Err))
	}
}

// logDelivery writes one line about d with the fields every surface logs:
// "outcome" (unless empty), "key" (or "key_digest"), and the "delivery"
// group.
func (g *Gateway) logDelivery(ctx context.Context, lg *slog.Logger, d *Delivery, level slog.Level, msg string, outcome Outcome, extra ...slog.Attr) {
	if !lg.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 3+len(extra))
	if outcome != "" {
		attrs = append(attrs, outcome.attr())
	}
	if d.Key != "" {
		attrs = append(attrs, g.keyAttr(d.Key))
	}
	attrs = append(attrs, extra...)
	scope{log: lg, d: d}.logAttrs(ctx, level, msg, attrs...)
}

// scope is where a guarded call logs: its logger, and the delivery it
// serves (nil for Lock and Mutex called directly), whose "delivery" group
// joins every line.
type scope struct {
	log *slog.Logger
	d   *Delivery
}

func (sc scope) logAttrs(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if !sc.log.Enabled(ctx, level) {
		return
	}
	if sc.d != nil {
		attrs = append(attrs, deliveryAttr(sc.d))
	}
	sc.log.LogAttrs(ctx, level, msg, attrs...)
}

// deliveryAttr groups what identifies a delivery in a log line.
func deliveryAttr(d *Delivery) slog.Attr {
	m := d.Message
	attrs := make([]slog.Attr, 0, 7)
	if m != nil {
		attrs = append(attrs, slog.String("message_id", m.ID))
	}
	attrs = append(attrs, slog.String("form", d.Form))
	if d.Path != "" {
		attrs = append(attrs, slog.String("path", d.Path))
	}
	if d.EventType != "" {
		attrs = append(attrs, slog.String("type", d.EventType))
	}
	if m == nil {
		return slog.Attr{Key: "delivery", Value: slog.GroupValue(attrs...)}
	}
	if m.Source != "" {
		attrs = append(attrs, slog.String("source", m.Source))
	}
	if m.Subscription != "" {
		attrs = append(attrs, slog.String("subscription", m.Subscription))
	}
	if m.DeliveryAttempt > 0 {
		attrs = append(attrs, slog.Int("delivery_attempt", m.DeliveryAttempt))
	}
	return slog.Attr{Key: "delivery", Value: slog.GroupValue(attrs...)}
}

// failedBy is the failed_by attribute of a line about a FAILED key: the
// origin of the delivery whose failure made it FAILED, or nothing.
func failedBy(origin string) slog.Attr {
	if origin == "" {
		return slog.Attr{}
	}
	return slog.String("failed_by", origin)
}

// heldBy is the held_by attribute of an in-progress line: the holder's
// origin, or nothing (an empty Attr, which slog drops) when the record
// keeps none.
func heldBy(origin string) slog.Attr {
	if origin == "" {
		return slog.Attr{}
	}
	return slog.String("held_by", origin)
}
