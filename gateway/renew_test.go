package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/idemgate/idemgate/internal/testenv"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A server testenv started is still waited for until StopAll.
		goleak.IgnoreAnyFunction("github.com/idemgate/idemgate/internal/testenv.Start.func1"),
		goleak.Cleanup(func(code int) {
			testenv.StopAll()
			os.Exit(code)
		}))
}

// Renewal is driven by timers, so these tests run in a synctest bubble:
// time is fake, a lease of a minute lapses at once when every goroutine
// waits, and the "work" is a sleep on that fake clock.

func TestRenewalKeepsLongWorkClaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		g, err := gateway.New(st, &gateway.Options{Logger: (&logs{}).logger()})
		if err != nil {
			t.Fatal(err)
		}
		checkLongWork(t, g, "m1", 5*gateway.DefaultRenewedLease, gateway.DefaultRenewedLease/2)
	})
}

// checkLongWork runs work lasting d under g.Lock, trying a redelivery of the
// key every tick meanwhile, and checks that the work kept its key (each
// redelivery is ErrInProgress), ran once and completed.
func checkLongWork(t *testing.T, g *gateway.Gateway, key string, d, tick time.Duration) {
	t.Helper()
	var runs atomic.Int32
	err := g.Lock(t.Context(), key, func(ctx context.Context) error {
		runs.Add(1)
		end := time.After(d)
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for {
			select {
			case <-end:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-ticker.C:
				if err := g.Lock(context.Background(), key, counter(&runs)); !errors.Is(err, gateway.ErrInProgress) {
					t.Errorf("a redelivery during renewed work = %v, want ErrInProgress", err)
				}
			}
		}
	})
	if err != nil || runs.Load() != 1 {
		t.Fatalf("long renewed work = %v (ran %d), want nil and one run", err, runs.Load())
	}
	if err := g.Lock(t.Context(), key, counter(&runs)); !errors.Is(err, gateway.ErrDuplicate) {
		t.Fatalf("after the work = %v, want ErrDuplicate", err)
	}
}

// A caller that goes away (a client disconnect, the push deadline, Receive
// shutting down) cancels the body's context, but a body inside a call that
// takes no context runs on. Its lease must be renewed until it returns, or
// a redelivery would win the lapsed key and run the same work beside it.
func TestRenewalOutlivesCallerContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		g, err := gateway.New(st, &gateway.Options{Logger: (&logs{}).logger()})
		if err != nil {
			t.Fatal(err)
		}
		const lease = gateway.DefaultRenewedLease
		ctx, cancel := context.WithCancel(t.Context())
		var runs atomic.Int32
		err = g.Lock(ctx, "m1", func(bctx context.Context) error {
			runs.Add(1)
			cancel() // the caller goes away ...
			if bctx.Err() == nil {
				t.Error("the caller's cancellation must reach the body's context")
			}
			for range 5 { // ... and the body ignores it, for five leases
				time.Sleep(lease)
				if err := g.Lock(context.Background(), "m1", counter(&runs)); !errors.Is(err, gateway.ErrInProgress) {
					t.Errorf("a redelivery while the body still runs = %v, want ErrInProgress (renewal must outlive the caller)", err)
				}
			}
			return nil
		})
		if err != nil || runs.Load() != 1 {
			t.Fatalf("Lock = %v (ran %d), want nil and one run", err, runs.Load())
		}
		if err := g.Lock(t.Context(), "m1", counter(&runs)); !errors.Is(err, gateway.ErrDuplicate) {
			t.Fatalf("after the body = %v, want ErrDuplicate: the work completed", err)
		}
	})
}

func TestRenewalFailureCancelsBeforeLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.failExtend.Store(true)
		l := &logs{}
		g, err := gateway.New(fs, &gateway.Options{Logger: l.logger()})
		if err != nil {
			t.Fatal(err)
		}
		const lease = gateway.DefaultRenewedLease
		start := time.Now()
		var held time.Duration
		err = g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			<-ctx.Done()
			held = time.Since(start)
			if !errors.Is(context.Cause(ctx), gateway.ErrLeaseLost) {
				t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(ctx))
			}
			// Nobody can take the key over yet: the lease has not ended.
			if c, err := st.Claim(context.Background(), "m1", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.HeldByOther {
				t.Errorf("Claim when the body is cancelled = %v, %v; want HeldByOther", c.Status, err)
			}
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v, want the body's cancellation", err)
		}
		if held >= lease || held < lease/2 {
			t.Fatalf("body cancelled %v after the claim; want after some renewal retries and before the %v lease ends", held, lease)
		}
		if len(l.lines(t, "ERROR")) != 1 {
			t.Fatalf("want one ERROR line for the lost claim, got %v", l.lines(t, "ERROR"))
		}
	})
}

func TestRenewalDetectsTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		g, _ := gateway.New(st, &gateway.Options{Logger: (&logs{}).logger()})
		err := g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			c, _ := gateway.ClaimFromContext(ctx)
			if err := st.Release(context.Background(), c); err != nil { // someone else's doing
				t.Error(err)
			}
			<-ctx.Done()
			return context.Cause(ctx)
		})
		if !errors.Is(err, gateway.ErrLeaseLost) {
			t.Fatalf("Lock = %v, want ErrLeaseLost", err)
		}
	})
}

// A renewal stuck on a slow store must not hold the body's answer: once the
// body returns, the Extend in flight is cancelled, not awaited until its own
// deadline most of a lease later.
func TestRenewalStopDoesNotWaitForSlowExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.hangExtend.Store(true)
		g, err := gateway.New(fs, &gateway.Options{Logger: (&logs{}).logger()})
		if err != nil {
			t.Fatal(err)
		}
		var returned time.Time
		err = g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			// Past the first renewal (a third of the lease, ±10%): an
			// Extend now hangs on the store.
			time.Sleep(gateway.DefaultRenewedLease / 2)
			returned = time.Now()
			return nil
		})
		if err != nil {
			t.Fatalf("Lock = %v", err)
		}
		if waited := time.Since(returned); waited != 0 {
			t.Fatalf("Lock answered %v after the body returned, waiting on a hung Extend; want at once", waited)
		}
		if fs.extends.Load() == 0 {
			t.Fatal("no Extend was in flight: the test proves nothing")
		}
	})
}

// extendsPerKey counts the Extend calls of each key.
type extendsPerKey struct {
	*memstore.Store
	mu sync.Mutex // guards n
	n  map[string]int
}

func (s *extendsPerKey) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	s.mu.Lock()
	s.n[c.Key]++
	s.mu.Unlock()
	return s.Store.Extend(ctx, c, lease)
}

func (s *extendsPerKey) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[key]
}

// One Gateway renews many live claims at once, each on its own timer.
// Many bodies of different lengths run at once: each must keep its key exactly as long as
// it runs (redeliveries meanwhile are in progress, after it are
// duplicates), be renewed every third of the lease or so, never be
// cancelled, and stop being renewed when it returns while the others go on.
func TestRenewalSchedulerServesManyClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		es := &extendsPerKey{Store: st, n: map[string]int{}}
		g, err := gateway.New(es, &gateway.Options{Logger: (&logs{}).logger()})
		if err != nil {
			t.Fatal(err)
		}
		const (
			lease  = gateway.DefaultRenewedLease
			claims = 40
		)
		// Body i lasts a quarter of the lease (it ends before its first
		// renewal) plus i eighths: ends fall on eighths, checks between.
		length := func(i int) time.Duration { return lease/4 + time.Duration(i)*lease/8 }
		key := func(i int) string { return "m" + strconv.Itoa(i) }
		start := time.Now()
		var (
			wg           sync.WaitGroup
			runs         [claims]atomic.Int32
			extendsAtEnd [claims]int
		)
		for i := range claims {
			wg.Go(func() {
				err := g.Lock(t.Context(), key(i), func(ctx context.Context) error {
					runs[i].Add(1)
					time.Sleep(length(i))
					if ctx.Err() != nil {
						t.Errorf("claim %d: body cancelled (%v) while its claim was renewed", i, context.Cause(ctx))
					}
					return nil
				})
				extendsAtEnd[i] = es.count(key(i))
				if err != nil {
					t.Errorf("claim %d: Lock = %v, want nil", i, err)
				}
			})
		}
		for at := lease/2 + lease/16; at < length(claims-1)+lease; at += lease / 2 {
			time.Sleep(at - time.Since(start))
			for i := range claims {
				err := g.Lock(context.Background(), key(i), counter(&runs[i]))
				if running := at < length(i); running && !errors.Is(err, gateway.ErrInProgress) {
					t.Errorf("at %v, claim %d (body of %v) redelivered = %v, want ErrInProgress", at, i, length(i), err)
				} else if !running && !errors.Is(err, gateway.ErrDuplicate) {
					t.Errorf("at %v, claim %d (body of %v) redelivered = %v, want ErrDuplicate", at, i, length(i), err)
				}
			}
		}
		wg.Wait()
		for i := range claims {
			if n := runs[i].Load(); n != 1 {
				t.Errorf("claim %d ran %d times, want once", i, n)
			}
			// Renewals come every 0.3 to 0.367 of the lease.
			n, d := es.count(key(i)), length(i)
			if lo, hi := int(d*30/(lease*11)), int(d*30/(lease*9)); n < lo || n > hi {
				t.Errorf("claim %d lasting %v was renewed %d times, want %d to %d", i, d, n, lo, hi)
			}
			if n != extendsAtEnd[i] {
				t.Errorf("claim %d was renewed %d times after its body returned", i, n-extendsAtEnd[i])
			}
		}
	})
}

// A Gateway may serve synctest bubbles in turn, and then real time: a
// timer runs on the clock of the bubble that made it, so no timer may be
// shared by claims of two bubbles. Were one kept, the next bubble's
// renewals would wait on a dead bubble's timer (and its leases lapse), and
// real time could not reset it at all.
func TestRenewalSchedulerAcrossBubbles(t *testing.T) {
	st, _ := memstore.New(nil)
	g, err := gateway.New(st, &gateway.Options{Logger: (&logs{}).logger()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		synctest.Test(t, func(t *testing.T) {
			checkLongWork(t, g, "bubble"+strconv.Itoa(i), 2*gateway.DefaultRenewedLease, gateway.DefaultRenewedLease/2)
		})
	}
	var runs atomic.Int32
	if err := g.Lock(t.Context(), "real", counter(&runs)); err != nil || runs.Load() != 1 {
		t.Fatalf("Lock outside a bubble after them = %v (ran %d), want nil and one run", err, runs.Load())
	}
}

// A Claim that took most of the lease (a store coming back from an outage)
// makes the first renewal late: it must still be tried, not failed unsent,
// or the body that has just begun would be cancelled and run again.
func TestRenewalAfterSlowClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		const lease = gateway.DefaultRenewedLease
		fs := &faulty{Store: st, claimDelay: lease * 9 / 10}
		l := &logs{}
		g, err := gateway.New(fs, &gateway.Options{Logger: l.logger()})
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int32
		err = g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			runs.Add(1)
			time.Sleep(lease) // past the end of the lease the Claim began
			return context.Cause(ctx)
		})
		if err != nil || runs.Load() != 1 {
			t.Fatalf("Lock after a slow Claim = %v (ran %d); want nil and one run: the late renewal must be tried", err, runs.Load())
		}
		if fs.extends.Load() == 0 || len(l.lines(t, "ERROR")) != 0 {
			t.Fatalf("%d Extends, ERROR lines %v; want renewals and no lost claim", fs.extends.Load(), l.lines(t, "ERROR"))
		}
	})
}

// A body that records its key done itself, inside its own transaction (a
// store's CompleteTx), and then goes on for a while: the next renewal's
// Extend finds no CLAIMED record, but the record is DONE under the body's
// own fence. Nothing was lost: no ERROR, no cancelled context, outcome won.
func TestRenewalAfterTheBodyCompleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		logs := &logs{}
		g, _ := gateway.New(st, &gateway.Options{Logger: logs.logger()})
		err := g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			c, _ := gateway.ClaimFromContext(ctx)
			if ok, err := st.Complete(context.Background(), c); !ok || err != nil { // as CompleteTx's commit would
				t.Errorf("Complete = %v, %v", ok, err)
			}
			time.Sleep(gateway.DefaultRenewedLease) // past several renewals
			return context.Cause(ctx)
		})
		if err != nil {
			t.Fatalf("Lock = %v, want nil: the body's context must not be cancelled", err)
		}
		if lines := logs.Records().Level(slog.LevelError); len(lines) != 0 {
			t.Errorf("ERROR lines after a body that completed its own claim:\n%s", lines)
		}
	})
}

// BenchmarkLockBesideHeldClaims measures a fresh renewed Lock while many
// other claims of the same Gateway are held, each with its renewal armed:
// what a busy service's renewals cost each new message.
func BenchmarkLockBesideHeldClaims(b *testing.B) {
	ctx := context.Background()
	for _, held := range []int{0, 10000} {
		b.Run("held="+strconv.Itoa(held), func(b *testing.B) {
			g := benchGateway(b, true, true)
			var started, done sync.WaitGroup
			release := make(chan struct{})
			for i := range held {
				started.Add(1)
				done.Go(func() {
					g.Lock(ctx, "held"+strconv.Itoa(i), func(context.Context) error {
						started.Done()
						<-release
						return nil
					})
				})
			}
			started.Wait()
			defer func() { close(release); done.Wait() }()
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = "m" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := g.Lock(ctx, keys[i&(1<<16-1)], nop); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
