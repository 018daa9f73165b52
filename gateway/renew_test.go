package gateway_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemgate/idemgate/internal/testenv"

	"github.com/idemgate/idemgate/gateway"
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

// These tests use a real clock: renewal is driven by timers. The "work" is a
// wait for a real duration; the test synchronises on channels.

const shortLease = 90 * time.Millisecond

func TestRenewalKeepsLongWorkClaimed(t *testing.T) {
	st, _ := memstore.New(nil)
	g, err := gateway.New(st, &gateway.Options{Lease: shortLease})
	if err != nil {
		t.Fatal(err)
	}
	checkLongWork(t, g, "m1", 5*shortLease, shortLease/2)
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

func TestRenewalFailureCancelsBeforeLeaseEnds(t *testing.T) {
	st, _ := memstore.New(nil)
	fs := &faulty{Store: st}
	fs.failExtend.Store(true)
	l := &logs{}
	g, err := gateway.New(fs, &gateway.Options{Lease: shortLease, Logger: l.logger()})
	if err != nil {
		t.Fatal(err)
	}
	var cancelledAt time.Time
	start := time.Now()
	err = g.Lock(t.Context(), "m1", func(ctx context.Context) error {
		<-ctx.Done()
		cancelledAt = time.Now()
		if !errors.Is(context.Cause(ctx), gateway.ErrLeaseLost) {
			t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(ctx))
		}
		// Nobody could reclaim yet: the lease has not ended.
		if _, err := st.Claim(context.Background(), "m1", time.Minute); err != nil {
			t.Error(err)
		}
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock = %v, want the body's cancellation", err)
	}
	if held := cancelledAt.Sub(start); held >= shortLease {
		t.Fatalf("body cancelled %v after the claim, want before the %v lease ends", held, shortLease)
	}
	if len(l.lines(t, "ERROR")) != 1 {
		t.Fatalf("want one ERROR line for the lost claim, got %v", l.lines(t, "ERROR"))
	}
}

func TestRenewalDetectsTakeover(t *testing.T) {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, &gateway.Options{Lease: shortLease, Logger: (&logs{}).logger()})
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
}
