package gateway_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/gateway"
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
