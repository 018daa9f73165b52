package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

func TestMutexEveryMessageRuns(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var runs atomic.Int32
	for range 3 {
		if err := f.g.Mutex(t.Context(), "po-1", counter(&runs)); err != nil {
			t.Fatalf("Mutex = %v, want nil (a mutex never marks its key done)", err)
		}
	}
	if runs.Load() != 3 {
		t.Fatalf("ran %d times, want 3", runs.Load())
	}
}

func TestMutexNeverOverlaps(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	const n = 16
	var (
		inside, maxInside, ran atomic.Int32
		wg                     sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			for { // a nacked delivery comes back until it runs
				err := f.g.Mutex(t.Context(), "po-1", func(context.Context) error {
					cur := inside.Add(1)
					for m := maxInside.Load(); cur > m && !maxInside.CompareAndSwap(m, cur); m = maxInside.Load() {
					}
					ran.Add(1)
					inside.Add(-1)
					return nil
				})
				if err == nil {
					return
				}
				if !errors.Is(err, gateway.ErrInProgress) {
					t.Errorf("Mutex = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if maxInside.Load() != 1 || ran.Load() != n {
		t.Fatalf("max concurrent bodies = %d, runs = %d; want 1 and %d", maxInside.Load(), ran.Load(), n)
	}
}

func TestMutexOnDoneKeyIsInProgress(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	f.g.Lock(t.Context(), "po-1", counter(new(atomic.Int32)))
	var runs atomic.Int32
	if err := f.g.Mutex(t.Context(), "po-1", counter(&runs)); !errors.Is(err, gateway.ErrInProgress) || runs.Load() != 0 {
		t.Fatalf("Mutex on a DONE key = %v, want ErrInProgress without running", err)
	}
	// It says what it met: a key completed by Lock, not a holder.
	err := f.g.Mutex(t.Context(), "po-1", counter(&runs))
	if ip, ok := errors.AsType[*gateway.InProgressError](err); !ok || !ip.Done || !strings.Contains(err.Error(), "completed by Lock") {
		t.Errorf("Mutex on a DONE key = %v, want an *InProgressError with Done that says so", err)
	}
}

func TestMutexReleasesOnErrorAndPanic(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	boom := errors.New("boom")
	if err := f.g.Mutex(t.Context(), "po-1", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Mutex = %v, want the body's error", err)
	}
	func() {
		defer func() { recover() }()
		f.g.Mutex(t.Context(), "po-1", func(context.Context) error { panic("boom") })
	}()
	if err := f.g.Mutex(t.Context(), "po-1", counter(new(atomic.Int32))); err != nil {
		t.Fatalf("Mutex after an error and a panic = %v, want nil (both must release)", err)
	}
}

// Without renewal, a Mutex body that outlives its lease may run beside the
// next caller. Mutex cannot stop it, but reports it: one ERROR line,
// outcome fenced_out; fn's nil is returned, since its work is done.
func TestMutexPastItsLeaseIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		l := &logs{}
		const lease = time.Second
		g, err := gateway.New(st, &gateway.Options{Lease: lease, NoRenew: true, Logger: l.logger()})
		if err != nil {
			t.Fatal(err)
		}
		var beside error
		err = g.Mutex(t.Context(), "po:7", func(ctx context.Context) error {
			time.Sleep(2 * lease)
			beside = g.Mutex(t.Context(), "po:7", func(context.Context) error { return nil })
			return nil
		})
		if err != nil || beside != nil {
			t.Fatalf("Mutex = %v, the caller beside it = %v; want nil, nil", err, beside)
		}
		lines := l.Records().Outcome(gateway.OutcomeFencedOut)
		if len(lines) != 1 || lines[0].Level != slog.LevelError {
			t.Fatalf("want one ERROR fenced_out line, got:\n%s", l.Records())
		}
	})
}

// A Mutex body that returns nil after losing its lease did not hold the
// key all along: Mutex returns the cause.
func TestMutexLeaseLostIsReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.failExtend.Store(true)
		g, _ := gateway.New(fs, &gateway.Options{Logger: (&logs{}).logger()})
		err := g.Mutex(t.Context(), "po:7", func(ctx context.Context) error { <-ctx.Done(); return nil })
		if !errors.Is(err, gateway.ErrLeaseLost) {
			t.Fatalf("Mutex = %v, want ErrLeaseLost", err)
		}
	})
}

// The boundary of the check above: a Mutex body that held its key exactly
// the lease is reported, since the store lets another caller claim the
// key from that instant on (now ≥ leaseUntil); one that returned just
// before is not.
func TestMutexHeldExactlyItsLease(t *testing.T) {
	for _, tc := range []struct {
		held   time.Duration
		beside store.Status // what a caller claiming the key then gets
		report bool
	}{{time.Second, store.Won, true}, {time.Second - time.Nanosecond, store.HeldByOther, false}} {
		t.Run(tc.held.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, _ := memstore.New(nil)
				l := &logs{}
				const lease = time.Second
				g, err := gateway.New(st, &gateway.Options{Lease: lease, NoRenew: true, Logger: l.logger()})
				if err != nil {
					t.Fatal(err)
				}
				err = g.Mutex(t.Context(), "po:7", func(ctx context.Context) error {
					time.Sleep(tc.held)
					if c, err := st.Claim(context.Background(), "po:7", lease, store.ClaimOptions{}); err != nil || c.Status != tc.beside {
						t.Errorf("a caller after %v = %v, %v; want %v", tc.held, c.Status, err, tc.beside)
					} else if c.Status == store.Won {
						st.Release(context.Background(), c)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("Mutex = %v, want nil", err)
				}
				if lines := l.Records().Outcome(gateway.OutcomeFencedOut); len(lines) != map[bool]int{true: 1, false: 0}[tc.report] {
					t.Errorf("a body that held its key %v of a %v lease: fenced_out lines:\n%s\nwant %v", tc.held, lease, lines, map[bool]string{true: "one", false: "none"}[tc.report])
				}
			})
		})
	}
}
