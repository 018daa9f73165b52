package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/fakeclock"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// logs collects log records; lines gives them back as the JSON handler
// would write them.
type logs struct{ logtest.Sink }

func (l *logs) logger() *slog.Logger { return l.Logger() }

// lines returns the records at level (e.g. "ERROR"), each decoded from
// its JSON form.
func (l *logs) lines(t testing.TB, level string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range l.Records() {
		if r.Level.String() != level {
			continue
		}
		m, err := r.JSON()
		if err != nil {
			t.Fatalf("log record %v: %v", r, err)
		}
		out = append(out, m)
	}
	return out
}

type fixture struct {
	clk  *fakeclock.Clock
	st   *memstore.Store
	g    *gateway.Gateway
	logs *logs
}

// newFixture returns a gateway over a fake-clock memstore (no renewal).
func newFixture(t testing.TB, opts gateway.Options) *fixture {
	t.Helper()
	f := &fixture{clk: fakeclock.New(), logs: &logs{}}
	var err error
	f.st, err = memstore.New(&memstore.Options{Now: f.clk.Now, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = f.logs.logger()
	opts.NoRenew = true
	f.g, err = gateway.New(f.st, &opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// renewingGateway returns a gateway over st with the defaults (renewal on),
// its log discarded.
func renewingGateway(t testing.TB, st store.Store) *gateway.Gateway {
	t.Helper()
	g, err := gateway.New(st, &gateway.Options{Logger: (&logs{}).logger()})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Inspect reads the wrapped store's record, when it can.
func (s *faulty) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	in, ok := s.Store.(store.Inspector)
	if !ok {
		return store.Record{}, false, errors.New("faulty: the wrapped store cannot inspect")
	}
	return in.Inspect(ctx, key)
}

// faulty wraps a real store and fails the operations switched on.
type faulty struct {
	store.Store
	failClaim, failComplete, failRelease, failExtend atomic.Bool
	hangExtend                                       atomic.Bool   // Extend waits for its context to end
	completeFailures                                 atomic.Int32  // so many Completes fail
	claimDelay                                       time.Duration // how long each Claim takes
	releases, extends                                atomic.Int32
}

var errInjected = errors.New("injected store failure")

func (f *faulty) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	if f.failClaim.Load() {
		return store.Claim{}, errInjected
	}
	time.Sleep(f.claimDelay)
	return f.Store.Claim(ctx, key, lease, opts)
}

func (f *faulty) Complete(ctx context.Context, c store.Claim) (bool, error) {
	if f.failComplete.Load() || f.completeFailures.Add(-1) >= 0 {
		return false, errInjected
	}
	return f.Store.Complete(ctx, c)
}

func (f *faulty) Release(ctx context.Context, c store.Claim) error {
	f.releases.Add(1)
	if f.failRelease.Load() {
		return errInjected
	}
	return f.Store.Release(ctx, c)
}

func (f *faulty) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	f.extends.Add(1)
	if f.failExtend.Load() {
		return store.Claim{}, errInjected
	}
	if f.hangExtend.Load() {
		<-ctx.Done()
		return store.Claim{}, ctx.Err()
	}
	return f.Store.(store.Extender).Extend(ctx, c, lease)
}

func counter(n *atomic.Int32) func(context.Context) error {
	return func(context.Context) error { n.Add(1); return nil }
}
