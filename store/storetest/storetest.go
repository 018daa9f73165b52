// Package storetest is the conformance suite for implementations of
// [store.Store]. Every store in this module runs it, and so should yours:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Config{
//			NewStore: func(t testing.TB, s storetest.Setup) store.Store {
//				st, err := mystore.New(..., mystore.Options{TTL: s.TTL, Now: s.Now})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return st
//			},
//		})
//	}
//
// The suite checks every row of the transition table in the [store]
// package documentation and the hard cases around it: racing claims,
// crashed holders, zombies, late completes, ttl expiry, retried claims,
// what a record keeps of [store.ClaimOptions], unusual keys, cancelled
// contexts, takeovers at the very edge of a lease, and the whole under
// concurrency, checked linearizable with [porcupine]. It requires
// store.Extender, store.Inspector and store.Lister of every store, runs the
// Fail cases on a store.Failer, and the TxComplete cases when Config.InTx
// is set. A store on a server clock cannot follow a fake one: set RealClock,
// and the suite waits for short real leases (Config.Tick) instead.
// docs/testing.md ("The conformance suite") describes each case.
//
// [porcupine]: https://github.com/anishathalye/porcupine
package storetest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Setup is what the suite asks of a new store.
type Setup struct {
	// TTL is the store's ttl for this case.
	TTL time.Duration
	// Now is the suite's clock. Stores with an injectable clock must use it;
	// stores on a server clock ignore it (and the Config says RealClock).
	Now func() time.Time
}

// Config tells the suite how to make and drive the store under test.
type Config struct {
	// NewStore returns a fresh, empty, isolated store configured by s.
	// It is called once per case, maybe from parallel cases.
	NewStore func(t testing.TB, s Setup) store.Store
	// RealClock says the store ignores Setup.Now. The suite then lets real
	// time pass to lapse leases and ttls, and runs cases in parallel.
	RealClock bool
	// Tick is the short lease and ttl used with a real clock: it must be
	// longer than one store operation. Default 150ms.
	Tick time.Duration
	// EdgeLease is the lease of the LeaseEdgeTakeovers case on a real
	// clock: make it as short as the store honours, so that leases lapse
	// while claims race and takeovers happen at the lease's edge. The case
	// asserts only safety, so a lease shorter than one operation is fine.
	// Default Tick.
	EdgeLease time.Duration
	// LinearizabilityOps caps the calls the Linearizable case records
	// across all its clients. Default 400. The case also stops starting
	// calls after two seconds, so a slow store records fewer.
	LinearizabilityOps int
	// InTx drives the transactional cases, for a store that can record a
	// claim done inside the caller's own transaction (a CompleteTx method).
	// It begins a transaction on the store's database and calls fn with
	// complete, which records c done inside that transaction; it commits
	// when fn returns nil and rolls back otherwise, and returns fn's error
	// or the commit's. The suite fails a store that has a CompleteTx method
	// and no InTx, so a capable store cannot skip these cases.
	InTx func(ctx context.Context, st store.Store, fn func(complete func(store.Claim) error) error) error
	// Delete removes key's record from st the way the store's own
	// expiry removes it: a purge of expired rows, a Redis key past its
	// expiry, a TTL policy deleting the entity or document, a sweep. The
	// suite calls it only on a record past its expiry. The FencesNeverRepeat
	// case needs it, and fails without it: a record made anew after a
	// deletion must not hand out a fence its predecessor handed out.
	Delete func(t testing.TB, st store.Store, key string)
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.NewStore == nil {
		t.Fatal("storetest: Config.NewStore is nil")
	}
	for _, c := range casesFor(cfg) {
		t.Run(c.name, func(t *testing.T) {
			if cfg.RealClock {
				t.Parallel()
			}
			if err := runCase(t, cfg, c, true); err != nil {
				t.Error(err)
			}
		})
	}
}

// check runs every case without subtests and returns the failures by case
// name. The suite's own tests use it to prove that broken stores fail.
func check(t testing.TB, cfg Config) map[string]error {
	var (
		mu   sync.Mutex
		errs = map[string]error{}
		wg   sync.WaitGroup
	)
	for _, c := range casesFor(cfg) {
		wg.Go(func() {
			if err := runCase(t, cfg, c, false); err != nil {
				mu.Lock()
				errs[c.name] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// names lists the case names in order (for tests).
func names() []string {
	out := make([]string, len(cases))
	for i, c := range cases {
		out[i] = c.name
	}
	sort.Strings(out)
	return out
}

// runCase runs c on a fresh store and returns the rule it broke, if any.
// keepFiles lets a failing case leave files for the reader (the
// Linearizable visualization); the suite's own tests, which fail on
// purpose, do not.
func runCase(t testing.TB, cfg Config, c testCase, keepFiles bool) error {
	e := newEnv(t, cfg, c.ttl)
	e.keepFiles = keepFiles
	return catch(func() { c.fn(e) })
}

// violation is a broken rule: env.fail panics with it, and catch recovers
// it as the failure.
type violation struct{ err error }

// catch runs f and returns the rule it broke, if any. A case runs through
// catch, and so does each goroutine of a case that checks rules.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			v, ok := r.(violation)
			if !ok {
				panic(r)
			}
			err = v.err
		}
	}()
	f()
	return nil
}

// env is what a case works with: one store and a clock that can be moved.
type env struct {
	t    testing.TB
	ctx  context.Context
	s    store.Store
	real bool
	tick time.Duration
	mu   sync.Mutex // guards fake and step
	fake time.Time
	// step moves the fake clock forward on every reading, so that time
	// passes inside a store operation that reads the clock more than once.
	step  time.Duration
	cfg   Config
	ttlOf ttlKind
	// keepFiles allows a failure to write files that outlive the test.
	keepFiles bool
}

type ttlKind uint8

const (
	longTTL  ttlKind = iota // two hours: nothing expires during a case
	shortTTL                // one tick
)

// longTTLValue is the ttl of the longTTL cases: longer than their hour-long
// leases, since a store refuses a lease that is not shorter than its ttl.
const longTTLValue = 2 * time.Hour

// lease is the lease of a case's first claim: an hour, or, under the short
// ttl, half a tick, which the store's ttl of one tick admits.
func (e *env) lease() time.Duration {
	if e.ttlOf == shortTTL {
		return e.tick / 2
	}
	return long
}

func newEnv(t testing.TB, cfg Config, ttl ttlKind) *env {
	e := &env{t: t, ctx: context.Background(), real: cfg.RealClock, tick: cfg.Tick, cfg: cfg, ttlOf: ttl}
	if e.tick <= 0 {
		e.tick = 150 * time.Millisecond
	}
	if !e.real {
		e.tick = time.Second
		e.fake = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	d := longTTLValue
	if ttl == shortTTL {
		d = e.tick
	}
	e.s = cfg.NewStore(t, Setup{TTL: d, Now: e.now})
	return e
}

func (e *env) now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.fake
	e.fake = e.fake.Add(e.step)
	return t
}

// pass lets d go by on the store's clock. On a real clock this is a wait for
// time itself, not a synchronisation: the store's clock is the only thing
// being waited for, and the margin covers the store's millisecond rounding.
func (e *env) pass(d time.Duration) {
	if e.real {
		time.Sleep(d + 20*time.Millisecond)
		return
	}
	e.mu.Lock()
	e.fake = e.fake.Add(d)
	e.mu.Unlock()
}

// fail ends the case with a broken rule. Its text names the rule, or
// starts with the call that broke it ("Claim(...) = ..."). A goroutine
// that calls it runs through catch.
func (e *env) fail(format string, args ...any) {
	panic(violation{fmt.Errorf(format, args...)})
}

// check fails the case with err, if err is not nil.
func (e *env) check(err error) {
	if err != nil {
		panic(violation{err})
	}
}

// expect fails the case unless ok.
func (e *env) expect(ok bool, format string, args ...any) {
	if !ok {
		e.fail(format, args...)
	}
}

// must fails the case, naming rule, if err is not nil.
func (e *env) must(err error, rule string) {
	if err != nil {
		e.fail("%s: %w", rule, err)
	}
}

// claim calls Claim and fails on error or an unexpected status.
func (e *env) claim(key string, lease time.Duration, want store.Status, rule string) store.Claim {
	return e.claimWith(store.ClaimOptions{}, key, lease, want, rule)
}

// claimWith is claim with opts.
func (e *env) claimWith(opts store.ClaimOptions, key string, lease time.Duration, want store.Status, rule string) store.Claim {
	c, err := e.s.Claim(e.ctx, key, lease, opts)
	e.must(err, fmt.Sprintf("%s: Claim(%.40q) error", rule, key))
	e.expect(c.Status == want, "%s: Claim(%.40q) = %v, want %v", rule, key, c.Status, want)
	e.expect(c.Key == key, "%s: Claim returned Key %.40q, want %.40q", rule, c.Key, key)
	return c
}

func (e *env) complete(c store.Claim, want bool, rule string) {
	ok, err := e.s.Complete(e.ctx, c)
	e.must(err, rule+": Complete error")
	e.expect(ok == want, "%s: Complete = %v, want %v", rule, ok, want)
}

func (e *env) release(c store.Claim, rule string) {
	e.must(e.s.Release(e.ctx, c), rule+": Release error")
}

func (e *env) fenceIs(c store.Claim, want int64, rule string) {
	e.expect(c.Fence == want, "%s: fence = %d, want %d", rule, c.Fence, want)
}
