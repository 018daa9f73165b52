package gateway

import (
	"cmp"
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

	// NoRenew turns off lease renewal. By default, over a store.Extender,
	// the gateway extends the lease while the work runs and cancels the
	// work's context with cause ErrLeaseLost if the claim is lost.
	NoRenew bool

	// RenewJitter returns how far from a third of the lease each renewal
	// of a claim comes, so that many holders do not renew in step; ctx
	// carries the values of the context Lock or Mutex was given. It must
	// be safe for concurrent use. Default: a uniform draw within ±lease/30
	// from math/rand/v2's global source.
	RenewJitter func(ctx context.Context, lease time.Duration) time.Duration

	// SettleTimeout bounds each Complete (with its retries) and Release,
	// which ignore the caller's cancellation so that a cancelled request
	// still settles its claim. Default DefaultSettleTimeout.
	SettleTimeout time.Duration

	// Logger receives the gateway's log lines. Default slog.Default().
	Logger *slog.Logger

	// DuplicateLogLevel is the level of the "duplicate delivery
	// acknowledged" line. Default slog.LevelInfo: after an incident "was
	// this message dropped as a duplicate?" comes first (docs/operations.md,
	// "Log lines", gives its cost).
	DuplicateLogLevel slog.Level

	// HideKeys logs, traces and returns a digest of each key instead of the
	// key (`idemgate digest KEY` prints it), for keys that carry personal
	// data. The message_id is logged as it is.
	HideKeys bool

	// OnDuplicate, if set, is called when Lock meets a completed key. It is
	// an observer: a panic inside it is logged and ignored, and it cannot
	// change the outcome.
	OnDuplicate func(ctx context.Context, key string)

	// OnConflict, if set, is called with both fingerprints when Lock meets
	// a key whose record keeps another payload's (see FingerprintFunc). It
	// is an observer, like OnDuplicate.
	OnConflict func(ctx context.Context, key string, stored, got []byte)

	// Disabled turns every guard into a logged pass-through that never
	// calls the store, for unit tests of handlers; IDEMGATE_DISABLED=1 (or
	// true, yes, on), read by New, does the same. Never in production:
	// duplicates then repeat their side effects.
	Disabled bool

	// MeterProvider receives the metrics idemgate.outcomes and
	// idemgate.store.duration (docs/operations.md). Default: the global
	// provider.
	MeterProvider metric.MeterProvider

	// TracerProvider, if set, receives a span per Lock and Mutex call.
	// Default: no spans (a span costs allocations even when nothing
	// records it).
	TracerProvider trace.TracerProvider

	// StoreName labels the store in metrics. Default: the store's package
	// name, e.g. "redisstore".
	StoreName string

	// The fields below are the settings of every route, on every surface
	// (push, cloudevent, pull); RouteOptions override them per route.

	// Key resolves the idempotency key of a delivery. Default
	// KeyFromMessageID (cloudevent's default is its KeyFromEvent). Routes of
	// several topics on one store need a prefix each (see KeyFromMessageID).
	Key KeyFunc

	// AllowUnguarded runs the work unguarded when no key can be resolved,
	// instead of refusing the delivery. Default false (fail closed).
	AllowUnguarded bool

	// MaxBodyBytes is the largest push body accepted; larger ones get 413.
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// Fingerprint, if set, fingerprints each delivery's payload so that a
	// key reused for a different payload is a conflict (see
	// FingerprintFunc). Default: none.
	Fingerprint FingerprintFunc

	// AcceptConflicts acknowledges a conflict as a duplicate (logged at
	// ERROR) instead of refusing it. Default false: the conflict is nacked
	// and ends in the dead-letter topic, where a human sees it.
	AcceptConflicts bool

	// MaxAttempts, when positive, is each key's attempt budget, counted in
	// its record: the failure that spends it makes the record FAILED, and
	// the key's later deliveries are refused unrun (or acknowledged, with
	// AckFailed) until an operator retries it (idemgate retry). A panic and
	// a cancelled caller count; a lost lease and contention do not
	// (docs/design.md, "Work that can never succeed, and copies that meet a
	// live holder"). It needs a store that implements store.Failer, as every
	// store of this module does. Default 0: no budget.
	MaxAttempts int

	// Terminal, if set, says whether an error of the work can never
	// succeed, as Permanent does for the errors it marks: such a failure
	// makes the record FAILED at once (see MaxAttempts).
	Terminal func(err error) bool

	// AckFailed acknowledges the deliveries of a FAILED key instead of
	// refusing them. Default false: refused with the answer that sends them
	// to the dead-letter topic fastest (docs/design.md, "Answers per
	// platform").
	AckFailed bool

	// WaitForHolder, when positive, makes a delivery that meets a live
	// holder poll the store for up to this long (and never past half of its
	// request's deadline) until the holder settles, instead of answering
	// "in progress" at once: it then ends as a duplicate, runs, or gets the
	// failure's answer. Keep it below the ack deadline. Default 0: no wait.
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

// RouteOptions are the settings of one route: a push route (Route), a
// CloudEvents function (cloudevent.Options.Route) or a pull subscriber
// (pull.Options.Route). Each field means what the Options field of its name
// means, and the rule is one: a field left at its zero value (nil, 0)
// takes the Gateway's setting, any other value replaces it. The switches
// are pointers so that a route can turn off what the Gateway turns on
// (new(false)); a negative MaxAttempts or WaitForHolder turns the
// Gateway's off, as a Terminal that returns false does.
type RouteOptions struct {
	Key             KeyFunc
	AllowUnguarded  *bool
	MaxBodyBytes    int64 // the HTTP surface's only
	Fingerprint     FingerprintFunc
	AcceptConflicts *bool
	MaxAttempts     int
	Terminal        func(err error) bool
	AckFailed       *bool
	WaitForHolder   time.Duration
}

// Route returns a Gateway for one route, with the settings of o over g's
// (nil o: all of g's). It shares g's store, lease, renewal, logger,
// telemetry, HideKeys and Disabled, and reads o only during the call. It
// is cheap, so that one Gateway serves every route of a service:
//
//	mux.Handle("POST /orders", g.Route(&gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}).Push(placeOrder))
func (g *Gateway) Route(o *RouteOptions) *Gateway {
	r := *g
	if o == nil {
		return &r
	}
	p := &r.opts
	p.Key = orFunc(o.Key, p.Key)
	p.Fingerprint = orFunc(o.Fingerprint, p.Fingerprint)
	p.Terminal = orFunc(o.Terminal, p.Terminal)
	p.AllowUnguarded = orBool(o.AllowUnguarded, p.AllowUnguarded)
	p.AcceptConflicts = orBool(o.AcceptConflicts, p.AcceptConflicts)
	p.AckFailed = orBool(o.AckFailed, p.AckFailed)
	p.MaxBodyBytes = cmp.Or(max(o.MaxBodyBytes, 0), p.MaxBodyBytes)
	p.MaxAttempts = max(cmp.Or(o.MaxAttempts, p.MaxAttempts), 0)
	p.WaitForHolder = max(cmp.Or(o.WaitForHolder, p.WaitForHolder), 0)
	return &r
}

// orFunc is the route's f if set, else the Gateway's.
func orFunc[F KeyFunc | FingerprintFunc | func(error) bool](route, gw F) F {
	if route != nil {
		return route
	}
	return gw
}

// orBool is the route's switch if set, else the Gateway's.
func orBool(route *bool, gw bool) bool {
	if route != nil {
		return *route
	}
	return gw
}
