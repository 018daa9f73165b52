package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/store"
)

// Defaults of Options.
const (
	// DefaultLease is the lease when the store cannot renew claims: long
	// enough for the work of one delivery, short enough that a crashed
	// holder's key frees in a quarter of an hour.
	DefaultLease = 15 * time.Minute
	// DefaultRenewedLease is the lease when the store implements
	// store.Extender: the gateway renews it while the work runs, so it
	// only bounds how long a crashed holder blocks its key.
	DefaultRenewedLease = time.Minute
	// DefaultSettleTimeout bounds each Complete, with its retries, and
	// each Release.
	DefaultSettleTimeout = 10 * time.Second
	// DefaultMaxBodyBytes is the largest push body the HTTP surface reads.
	DefaultMaxBodyBytes = 16 << 20
)

// Options configures a Gateway. The zero value means the defaults; New
// copies it, so the caller may reuse it.
type Options struct {
	// Lease is how long a claim owns its key before another delivery may
	// take it over. Default DefaultLease, or DefaultRenewedLease when the
	// store implements store.Extender and renewal is on.
	Lease time.Duration

	// NoRenew turns off lease renewal. By default, when the store
	// implements store.Extender, the gateway extends the lease every third
	// of it while the body runs, and cancels the body's context (with
	// cause ErrLeaseLost) if the claim is lost.
	NoRenew bool

	// RenewJitter returns how far from a third of the lease each renewal
	// of a claim comes, so that many holders do not renew in step; ctx
	// carries the values of the context Lock or Mutex was given. It must
	// be safe for concurrent use. Default: a uniform draw within ±lease/30
	// from math/rand/v2's global source.
	RenewJitter func(ctx context.Context, lease time.Duration) time.Duration

	// SettleTimeout bounds each Complete and Release, which run on a
	// context that ignores the caller's cancellation so that a cancelled
	// request still settles its claim. A failed Complete is tried again
	// within it. Default DefaultSettleTimeout.
	SettleTimeout time.Duration

	// Logger receives the gateway's log lines. Default slog.Default().
	Logger *slog.Logger

	// DuplicateLogLevel is the level of the line of a delivery acknowledged
	// as a duplicate ("idemgate: duplicate delivery acknowledged", with the
	// record's fence). Default slog.LevelInfo, the zero Level: after an
	// incident "was this message dropped as a duplicate?" comes first, and
	// the line answers it at the level services log at. slog.LevelDebug
	// moves it out of an INFO log (a line of about 400 bytes per duplicate:
	// docs/operations.md). The line names the delivery that did the work
	// (done_by). The line of a delivery that ran is at DEBUG.
	DuplicateLogLevel slog.Level

	// HideKeys logs a short digest of each key instead of the key itself,
	// for keys that carry personal data, in every line, span and returned
	// error where the work did not run (`idemgate digest KEY` prints a
	// key's digest). The delivery's message_id is logged as it is: with a
	// messageId key (the default) that is the key, so HideKeys matters for
	// business keys.
	HideKeys bool

	// OnDuplicate, if set, is called when Lock meets a completed key. It is
	// an observer: a panic inside it is logged and ignored, and it cannot
	// change the outcome.
	OnDuplicate func(ctx context.Context, key string)

	// OnConflict, if set, is called when Lock meets a key whose record
	// keeps another payload's fingerprint (see FingerprintFunc), with both
	// fingerprints. It is an observer, like OnDuplicate.
	OnConflict func(ctx context.Context, key string, stored, got []byte)

	// Disabled turns every guard into a logged pass-through: the work runs
	// unguarded and the store is never called. It is meant for unit tests
	// of handlers. The environment variable IDEMGATE_DISABLED=1 (or true,
	// yes, on), read once by New, has the same effect. Never set it in
	// production: duplicates then repeat their side effects.
	Disabled bool

	// MeterProvider receives the gateway's metrics: the counter
	// idemgate.outcomes (attribute outcome) and the histogram
	// idemgate.store.duration in seconds (attributes store, operation).
	// Default: the global provider, which does nothing until the
	// application installs an OpenTelemetry SDK.
	MeterProvider metric.MeterProvider

	// TracerProvider, if set, receives a span per Lock and Mutex call,
	// with the key (or its digest), outcome and fence as attributes; pass
	// otel.GetTracerProvider() to use the global one. Default: no spans.
	// Spans are opt-in because starting one costs allocations on every
	// call even when no SDK records it, while the outcomes are already in
	// the metrics and the logs.
	TracerProvider trace.TracerProvider

	// StoreName labels the store in metrics. Default: the store's package
	// name, e.g. "redisstore".
	StoreName string

	// The fields below configure the HTTP surface (Idempotent and Push):
	// they are the defaults of every route, which Route can override.

	// Key resolves the idempotency key of a push delivery. Default
	// KeyFromMessageID: a messageId is unique within its topic only, so
	// routes of several topics on one store need a prefix each (see
	// KeyFromMessageID).
	Key KeyFunc

	// AllowUnguarded runs the handler unguarded when no key can be
	// resolved, instead of answering 500. Default false (fail closed).
	AllowUnguarded bool

	// MaxBodyBytes is the largest push body accepted; larger ones get 413.
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// Fingerprint, if set, fingerprints each delivery's payload so that a
	// key reused for a different payload is a conflict (see
	// FingerprintFunc). Default: none.
	Fingerprint FingerprintFunc

	// AcceptConflicts acknowledges a conflict as a duplicate (logged at
	// ERROR) instead of refusing it. Default false: a conflict answers 409,
	// a nack, so that the message ends in the dead-letter topic where a
	// human sees it.
	AcceptConflicts bool

	// The fields below decide what becomes of work that can never succeed
	// (a poison message). They need a store that implements store.Failer,
	// as every store of this module does; New refuses MaxAttempts over one
	// that does not, and Permanent and Terminal then only release.

	// MaxAttempts, when positive, is the attempt budget of a key: each
	// failure of its work is counted in its record (independently of
	// Pub/Sub's own delivery count), and the failure that reaches the
	// budget makes the record FAILED. A FAILED key's deliveries do not run
	// the work; they are refused so that the subscription's dead-letter
	// policy moves them (or acknowledged, with AckFailed), until an
	// operator retries the key (idemgate retry) or the record expires.
	// Work that returns Permanent(err), or an error Terminal accepts, makes
	// the record FAILED at once, with or without a budget. A panic counts
	// (a message that makes the work panic is poison too), and so does a
	// failure because the caller's context ended (a push past its ack
	// deadline); a lost lease and a fenced-out transaction do not: another
	// holder has the key. A process that dies mid-work counts nothing:
	// Pub/Sub's own dead-letter policy bounds those. Default 0: no budget.
	MaxAttempts int

	// Terminal, if set, says whether an error of the work can never
	// succeed, as Permanent does for the errors it marks: a supplier's
	// 4xx, say, or a handler's status (see HandlerStatus).
	Terminal func(err error) bool

	// AckFailed acknowledges the deliveries of a FAILED key (and the one
	// whose failure made it FAILED) instead of refusing them: the message
	// is dropped, and the record keeps why for `idemgate failed` until it
	// expires. Default false: refused with the answer that sends it to the
	// dead-letter topic fastest on its surface (see docs/design.md,
	// "Answers per platform").
	AckFailed bool

	// WaitForHolder, when positive, makes a delivery that meets a live
	// holder wait, up to this long, for the holder to settle, instead of
	// answering "in progress" (503) at once: a holder that completes makes
	// it a duplicate (acknowledged), one that releases lets it claim the
	// key and run, one that fails for good gives it the failure's answer.
	// The wait never outlasts the request's own deadline, and ends early
	// when the holder's lease does (the key is then taken over). It polls
	// the store with Claim, 25 ms after the first and doubling to at most
	// 500 ms: about log2(w/25ms) + w/500ms Claims for a wait of w (a
	// 5 s wait is at most 14), each one round trip, or one read and no
	// write on Datastore and Firestore. Keep it below the subscription's
	// ack deadline. Default 0: no wait.
	WaitForHolder time.Duration
}

// Gateway runs work at most once per key (Lock) or one at a time per key
// (Mutex) using a store. It is safe for concurrent use.
type Gateway struct {
	st       store.Store
	tel      *telemetry
	ext      store.Extender // nil when the store cannot renew, or renewal is off
	failer   store.Failer   // nil when the store keeps no failures
	opts     Options
	log      *slog.Logger
	disabled bool
}

// New returns a Gateway over st. A nil opts means the defaults. Invalid
// options make New fail.
func New(st store.Store, opts *Options) (*Gateway, error) {
	if st == nil {
		return nil, errors.New("gateway: nil store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"Lease", int64(o.Lease)}, {"SettleTimeout", int64(o.SettleTimeout)}, {"MaxBodyBytes", o.MaxBodyBytes},
		{"MaxAttempts", int64(o.MaxAttempts)}, {"WaitForHolder", int64(o.WaitForHolder)}} {
		if f.v < 0 {
			return nil, errors.New("gateway: Options." + f.name + " is negative")
		}
	}
	g := &Gateway{st: st}
	if x, ok := st.(store.Extender); ok && !o.NoRenew {
		g.ext = x
	}
	g.failer, _ = st.(store.Failer)
	if o.MaxAttempts > 0 && g.failer == nil {
		return nil, fmt.Errorf("gateway: Options.MaxAttempts needs a store that keeps failures (store.Failer); %T does not", st)
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
		if g.ext != nil {
			o.Lease = DefaultRenewedLease
		}
	}
	if g.ext != nil && o.Lease < minRenewedLease {
		return nil, errors.New("gateway: a renewed Lease must be at least " + minRenewedLease.String())
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = DefaultSettleTimeout
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Key == nil {
		o.Key = KeyFromMessageID
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	g.opts, g.log = o, o.Logger
	var err error
	if g.tel, err = newTelemetry(&o, st); err != nil {
		return nil, err
	}
	g.disabled = o.Disabled || envTrue(os.Getenv("IDEMGATE_DISABLED"))
	if g.disabled {
		g.log.Warn("idemgate: guard disabled: work runs unguarded and duplicates repeat their side effects")
	}
	return g, nil
}

func envTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// RouteOptions are the settings of one route: a push route, or the
// gateway a CloudEvents function or a pull subscriber is wrapped with. A
// zero field means the Gateway's own (Options.Key, AllowUnguarded,
// MaxBodyBytes, Fingerprint, AcceptConflicts, MaxAttempts, Terminal,
// AckFailed, WaitForHolder). The switches are pointers so that a route can turn off
// what the Gateway turns on: nil inherits, new(false) turns it off for the
// route, new(true) on.
type RouteOptions struct {
	// Key resolves the idempotency key of the route's deliveries.
	Key KeyFunc
	// AllowUnguarded, when set, says whether the route's handler runs
	// unguarded when no key can be resolved, instead of answering 500.
	AllowUnguarded *bool
	// MaxBodyBytes is the largest push body the route accepts; larger ones
	// get 413.
	MaxBodyBytes int64
	// Fingerprint fingerprints the route's payloads (see FingerprintFunc).
	Fingerprint FingerprintFunc
	// AcceptConflicts, when set, says whether the route acknowledges its
	// conflicts as duplicates.
	AcceptConflicts *bool
	// MaxAttempts, when positive, is the route's attempt budget per key
	// (see Options.MaxAttempts); negative turns the Gateway's off for the
	// route.
	MaxAttempts int
	// Terminal says which errors of the route's work can never succeed;
	// func(error) bool { return false } turns the Gateway's off.
	Terminal func(err error) bool
	// AckFailed, when set, says whether the route acknowledges the
	// deliveries of its FAILED keys.
	AckFailed *bool
	// WaitForHolder, when positive, is how long the route's deliveries
	// wait for a live holder to settle (see Options.WaitForHolder);
	// negative turns the Gateway's off for the route.
	WaitForHolder time.Duration
}

// Route returns a Gateway for one push route, for its Idempotent and Push:
// it shares g's store, lease, renewal, logger, telemetry, HideKeys and
// Disabled, and takes the route's settings from o where they are set (nil
// o: all of g's). o is read at the call and never kept. It is cheap, so
// that one Gateway serves every route of a service:
//
//	mux.Handle("POST /orders", g.Route(&gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}).Push(placeOrder))
func (g *Gateway) Route(o *RouteOptions) *Gateway {
	r := *g
	if o == nil {
		return &r
	}
	if o.Key != nil {
		r.opts.Key = o.Key
	}
	if o.AllowUnguarded != nil {
		r.opts.AllowUnguarded = *o.AllowUnguarded
	}
	if o.MaxBodyBytes > 0 {
		r.opts.MaxBodyBytes = o.MaxBodyBytes
	}
	if o.Fingerprint != nil {
		r.opts.Fingerprint = o.Fingerprint
	}
	if o.AcceptConflicts != nil {
		r.opts.AcceptConflicts = *o.AcceptConflicts
	}
	if o.MaxAttempts != 0 {
		r.opts.MaxAttempts = max(o.MaxAttempts, 0)
	}
	if o.Terminal != nil {
		r.opts.Terminal = o.Terminal
	}
	if o.AckFailed != nil {
		r.opts.AckFailed = *o.AckFailed
	}
	if o.WaitForHolder != 0 {
		r.opts.WaitForHolder = max(o.WaitForHolder, 0)
	}
	return &r
}
