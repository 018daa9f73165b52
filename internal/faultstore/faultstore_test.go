package faultstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/internal/faultstore"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

func newStore(t *testing.T, opts *faultstore.Options) *faultstore.Store {
	t.Helper()
	mem, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return faultstore.New(mem, opts)
}

// status claims key on the wrapped store, as a fresh caller, and returns
// what it found.
func status(t *testing.T, s *faultstore.Store, key string) store.Status {
	t.Helper()
	c, err := s.Inner().Claim(t.Context(), key, time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Status
}

func TestFailIsNotApplied(t *testing.T) {
	s := newStore(t, nil)
	s.Arm(faultstore.Claim, faultstore.Fail)
	if _, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("armed Claim: err = %v, want ErrInjected", err)
	}
	if got := status(t, s, "k"); got != store.Won {
		t.Errorf("a failed Claim must not reach the store: a fresh Claim answers %v, want won", got)
	}
}

func TestLostIsApplied(t *testing.T) {
	s := newStore(t, nil)
	c, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Arm(faultstore.Complete, faultstore.Lost)
	if ok, err := s.Complete(t.Context(), c); !errors.Is(err, faultstore.ErrInjected) || ok {
		t.Fatalf("Complete with a lost reply = %v, %v; want false, ErrInjected", ok, err)
	}
	if got := status(t, s, "k"); got != store.AlreadyDone {
		t.Errorf("a Complete whose reply was lost must be applied: a fresh Claim answers %v, want already_done", got)
	}
}

func TestFaultFiresOnce(t *testing.T) {
	s := newStore(t, nil)
	s.Arm(faultstore.Claim, faultstore.Fail)
	s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
	if _, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err != nil {
		t.Errorf("the second Claim after one armed fault: %v, want success", err)
	}
	if started, ended := s.Calls(faultstore.Claim); started != 2 || ended != 2 {
		t.Errorf("Calls(Claim) = %d, %d; want 2, 2", started, ended)
	}
}

func TestDisarmReportsUnfired(t *testing.T) {
	s := newStore(t, nil)
	s.Arm(faultstore.Release, faultstore.Fail)
	s.Arm(faultstore.Extend, faultstore.Lost)
	if got, want := s.Disarm(), []faultstore.Op{faultstore.Release, faultstore.Extend}; !slices.Equal(got, want) {
		t.Errorf("Disarm = %v, want %v", got, want)
	}
	if got := s.Disarm(); len(got) != 0 {
		t.Errorf("a second Disarm = %v, want nothing", got)
	}
}

func TestExtendPassesThrough(t *testing.T) {
	s := newStore(t, nil)
	c, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Extend(t.Context(), c, time.Hour)
	if err != nil || !nc.LeaseUntil.After(c.LeaseUntil) {
		t.Errorf("Extend = %v, %v; want a later lease", nc.LeaseUntil, err)
	}
	s.Arm(faultstore.Extend, faultstore.Fail)
	if _, err := s.Extend(t.Context(), c, time.Hour); !errors.Is(err, faultstore.ErrInjected) {
		t.Errorf("armed Extend: err = %v, want ErrInjected", err)
	}
}

func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, &faultstore.Options{Delay: time.Second})
		start := time.Now()
		if _, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("a Claim took %v, want 2s: the delay on the way there and back", took)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second/2)
		defer cancel()
		if _, err := s.Claim(ctx, "k2", time.Minute, store.ClaimOptions{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a Claim whose context ends during the delay: err = %v, want DeadlineExceeded", err)
		}
	})
}

func TestAwaitEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, &faultstore.Options{Delay: time.Second})
		go s.Claim(context.Background(), "k", time.Minute, store.ClaimOptions{})
		if !s.AwaitEnded(t.Context(), faultstore.Claim, 1) {
			t.Fatal("AwaitEnded gave up on a Claim that ends")
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if s.AwaitEnded(ctx, faultstore.Claim, 2) {
			t.Error("AwaitEnded reported a Claim that never started")
		}
	})
}

// Inject calls the operation, or not, as each mode says, and a Slow reply
// comes its delay late; a Hang or a Slow reply ends with the caller's
// context.
func TestInject(t *testing.T) {
	for _, tc := range []struct {
		mode    faultstore.Mode
		cancel  bool // the caller's context ends after a second
		called  bool
		err     error // wrapped by the result; nil: none
		elapsed time.Duration
	}{
		{mode: 0, called: true},
		{mode: faultstore.Fail, err: faultstore.ErrInjected},
		{mode: faultstore.Lost, called: true, err: faultstore.ErrInjected},
		{mode: faultstore.Slow, called: true, elapsed: time.Minute},
		{mode: faultstore.Slow, cancel: true, called: true, err: context.DeadlineExceeded, elapsed: time.Second},
		{mode: faultstore.Hang, cancel: true, err: context.DeadlineExceeded, elapsed: time.Second},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				if tc.cancel {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Second)
					defer cancel()
				}
				called := false
				start := time.Now()
				err := faultstore.Inject(ctx, faultstore.Claim, "k", tc.mode, time.Minute, func() error { called = true; return nil })
				if called != tc.called || (tc.err == nil) != (err == nil) || tc.err != nil && !errors.Is(err, tc.err) {
					t.Errorf("Inject(%v) called the operation: %v, returned %v; want %v, an error wrapping %v", tc.mode, called, err, tc.called, tc.err)
				}
				if got := time.Since(start); got != tc.elapsed {
					t.Errorf("Inject(%v) took %v, want %v", tc.mode, got, tc.elapsed)
				}
			})
		})
	}
}
