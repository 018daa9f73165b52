package gateway_test

import (
	"context"
	"errors"
	"fmt"
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

func TestLockRedeliveryRunsOnce(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var runs atomic.Int32
	if err := f.g.Lock(t.Context(), "m1", counter(&runs)); err != nil {
		t.Fatalf("first Lock = %v, want nil", err)
	}
	if err := f.g.Lock(t.Context(), "m1", counter(&runs)); !errors.Is(err, gateway.ErrDuplicate) {
		t.Fatalf("redelivered Lock = %v, want ErrDuplicate", err)
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("body ran %d times, want 1", got)
	}
}

func TestLockConcurrentDuplicateAdmitsOne(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	const n = 32
	var (
		runs    atomic.Int32
		wg      sync.WaitGroup
		inBody  = make(chan struct{})
		release = make(chan struct{})
		errs    = make([]error, n)
	)
	// The winner blocks in its body until every other delivery has answered.
	wg.Go(func() {
		errs[0] = f.g.Lock(t.Context(), "m1", func(context.Context) error {
			runs.Add(1)
			close(inBody)
			<-release
			return nil
		})
	})
	<-inBody
	var others sync.WaitGroup
	for i := 1; i < n; i++ {
		others.Go(func() { errs[i] = f.g.Lock(t.Context(), "m1", counter(&runs)) })
	}
	others.Wait()
	close(release)
	wg.Wait()
	if errs[0] != nil {
		t.Fatalf("winner = %v", errs[0])
	}
	for i := 1; i < n; i++ {
		var ip *gateway.InProgressError
		if !errors.As(errs[i], &ip) || !errors.Is(errs[i], gateway.ErrInProgress) {
			t.Fatalf("concurrent Lock = %v, want *InProgressError", errs[i])
		}
		if want := f.clk.Now().Add(gateway.DefaultLease); !ip.LeaseUntil.Equal(want) {
			t.Fatalf("InProgressError.LeaseUntil = %v, want the holder's %v", ip.LeaseUntil, want)
		}
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("body ran %d times, want 1", got)
	}
	// The nacked deliveries come back and find the work done.
	if err := f.g.Lock(t.Context(), "m1", counter(&runs)); !errors.Is(err, gateway.ErrDuplicate) {
		t.Fatalf("retry after the winner = %v, want ErrDuplicate", err)
	}
}

func TestLockErrorReleasesForRetry(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	boom := errors.New("supplier down")
	var runs atomic.Int32
	err := f.g.Lock(t.Context(), "m1", func(context.Context) error { runs.Add(1); return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Lock = %v, want the body's error", err)
	}
	if err := f.g.Lock(t.Context(), "m1", counter(&runs)); err != nil {
		t.Fatalf("retry after a failure = %v, want nil (the failed claim must be released, not left held)", err)
	}
	if err := f.g.Lock(t.Context(), "m1", counter(&runs)); !errors.Is(err, gateway.ErrDuplicate) {
		t.Fatalf("third delivery = %v, want ErrDuplicate", err)
	}
	if got := runs.Load(); got != 2 {
		t.Fatalf("body ran %d times, want 2 (fail, then succeed once)", got)
	}
}

func TestLockPanicReleasesAndRepanics(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the body's panic", r)
			}
		}()
		f.g.Lock(t.Context(), "m1", func(context.Context) error { panic("boom") })
		t.Fatal("Lock returned after a panicking body")
	}()
	var runs atomic.Int32
	if err := f.g.Lock(t.Context(), "m1", counter(&runs)); err != nil || runs.Load() != 1 {
		t.Fatalf("retry after a panic = %v (ran %d), want nil and one run", err, runs.Load())
	}
}

func TestLockCrashedHolderSelfHeals(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	// A holder claims and dies without settling.
	dead, err := f.st.Claim(t.Context(), "m1", gateway.DefaultLease, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	if err := f.g.Lock(t.Context(), "m1", counter(&runs)); !errors.Is(err, gateway.ErrInProgress) {
		t.Fatalf("Lock during the dead holder's lease = %v, want ErrInProgress", err)
	}
	f.clk.Advance(gateway.DefaultLease)
	err = f.g.Lock(t.Context(), "m1", func(ctx context.Context) error {
		c, ok := gateway.ClaimFromContext(ctx)
		if !ok || c.Fence <= dead.Fence || c.Key != "m1" {
			t.Errorf("ClaimFromContext = %+v, %v; want key m1 with a fence above the dead holder's %d", c, ok, dead.Fence)
		}
		runs.Add(1)
		return nil
	})
	if err != nil || runs.Load() != 1 {
		t.Fatalf("Lock after the lease lapsed = %v (ran %d), want it to run once", err, runs.Load())
	}
}

func TestLockWorkOutranLeaseNotReclaimed(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	err := f.g.Lock(t.Context(), "m1", func(context.Context) error {
		f.clk.Advance(2 * gateway.DefaultLease) // slow work, nobody else came
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.g.Lock(t.Context(), "m1", counter(new(atomic.Int32))); !errors.Is(err, gateway.ErrDuplicate) {
		t.Fatalf("redelivery = %v, want ErrDuplicate (a late Complete must still commit)", err)
	}
	if n := len(f.logs.lines(t, "ERROR")); n != 0 {
		t.Fatalf("%d ERROR lines, want none", n)
	}
}

func TestLockFencedOutAfterSuccessAcksAndLogs(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var runs atomic.Int32
	err := f.g.Lock(t.Context(), "m1", func(ctx context.Context) error {
		runs.Add(1)
		f.clk.Advance(2 * gateway.DefaultLease)
		// A redelivery reclaims the lapsed key and runs too.
		if err := f.g.Lock(ctx, "m1", counter(&runs)); err != nil {
			t.Errorf("reclaiming delivery = %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("fenced-out Lock = %v, want nil: the work happened, a retry would repeat it", err)
	}
	lines := f.logs.lines(t, "ERROR")
	if len(lines) != 1 || lines[0]["outcome"] != string(gateway.OutcomeFencedOut) || lines[0]["key"] != "m1" {
		t.Fatalf("ERROR lines = %v, want one fenced_out line for m1", lines)
	}
}

func TestLockCompleteFailureAcksAndLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.failComplete.Store(true)
		l := &logs{}
		g, _ := gateway.New(fs, &gateway.Options{Logger: l.logger(), NoRenew: true})
		start := time.Now()
		if err := g.Lock(t.Context(), "m1", func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Lock with a failing Complete = %v, want nil", err)
		}
		if took := time.Since(start); took != gateway.DefaultSettleTimeout {
			t.Errorf("Lock gave up on Complete after %v, want the SettleTimeout, %v", took, gateway.DefaultSettleTimeout)
		}
		lines := l.lines(t, "ERROR")
		if len(lines) != 1 || lines[0]["outcome"] != string(gateway.OutcomeCompleteError) || lines[0]["attempts"].(float64) < 10 {
			t.Fatalf("ERROR lines = %v, want one complete_error line after many attempts", lines)
		}
	})
}

// Complete is idempotent, so a failed one is tried again: work done must
// not stay unrecorded because of one dropped connection.
func TestLockCompleteRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.completeFailures.Store(2)
		l := &logs{}
		g, _ := gateway.New(fs, &gateway.Options{Logger: l.logger(), NoRenew: true})
		var runs atomic.Int32
		if err := g.Lock(t.Context(), "m1", counter(&runs)); err != nil {
			t.Fatalf("Lock = %v, want nil", err)
		}
		if err := g.Lock(t.Context(), "m1", counter(&runs)); !errors.Is(err, gateway.ErrDuplicate) {
			t.Fatalf("redelivery = %v, want ErrDuplicate: the third Complete recorded the work", err)
		}
		if warns := l.lines(t, "WARN"); len(warns) != 1 || warns[0]["attempts"] != 3.0 || len(l.lines(t, "ERROR")) != 0 {
			t.Fatalf("WARN lines %v, ERROR lines %v; want one WARN after 3 attempts and no ERROR", warns, l.lines(t, "ERROR"))
		}
	})
}

func TestLockClaimFailureIsReturned(t *testing.T) {
	st, _ := memstore.New(nil)
	fs := &faulty{Store: st}
	fs.failClaim.Store(true)
	g, _ := gateway.New(fs, nil)
	var runs atomic.Int32
	err := g.Lock(t.Context(), "m1", counter(&runs))
	if !errors.Is(err, gateway.ErrStore) || !errors.Is(err, errInjected) {
		t.Fatalf("Lock with a failing Claim = %v, want ErrStore wrapping the cause", err)
	}
	if runs.Load() != 0 {
		t.Fatal("the body ran although the claim failed")
	}
}

func TestLockTTLExpiryRunsAgain(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var runs atomic.Int32
	f.g.Lock(t.Context(), "m1", counter(&runs))
	f.clk.Advance(time.Hour)
	if err := f.g.Lock(t.Context(), "m1", counter(&runs)); err != nil || runs.Load() != 2 {
		t.Fatalf("Lock after the ttl = %v (ran %d), want a new run", err, runs.Load())
	}
}

func TestLockInvalidKeyFailsClosed(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	for _, key := range []string{"", "a\x00b", "\xff"} {
		var runs atomic.Int32
		err := f.g.Lock(t.Context(), key, counter(&runs))
		if !errors.Is(err, gateway.ErrNoKey) || !errors.Is(err, store.ErrInvalidKey) || runs.Load() != 0 {
			t.Fatalf("Lock(%q) = %v (ran %d), want ErrNoKey and no run", key, err, runs.Load())
		}
	}
}

func TestLockCancelledRequestStillSettles(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	err := f.g.Lock(ctx, "m1", func(context.Context) error {
		cancel() // the client went away after the work was done
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.g.Lock(t.Context(), "m1", counter(new(atomic.Int32))); !errors.Is(err, gateway.ErrDuplicate) {
		t.Fatalf("redelivery = %v, want ErrDuplicate (Complete must run on a non-cancelled context)", err)
	}
}

// The observer hooks cannot change an outcome: a panic in OnDuplicate or
// OnConflict is logged once and ignored.
func TestObserverHooksAreIsolated(t *testing.T) {
	var seen atomic.Int32
	f := newFixture(t, gateway.Options{
		OnDuplicate: func(context.Context, string) { seen.Add(1); panic("hook bug") },
		OnConflict:  func(context.Context, string, []byte, []byte) { seen.Add(1); panic("hook bug") },
	})
	a, b := gateway.WithFingerprint(t.Context(), []byte("A")), gateway.WithFingerprint(t.Context(), []byte("B"))
	f.g.Lock(a, "m1", counter(new(atomic.Int32)))
	if err := f.g.Lock(a, "m1", counter(new(atomic.Int32))); !errors.Is(err, gateway.ErrDuplicate) {
		t.Fatalf("Lock with a panicking OnDuplicate = %v, want ErrDuplicate", err)
	}
	if err := f.g.Lock(b, "m1", counter(new(atomic.Int32))); !errors.Is(err, gateway.ErrConflict) {
		t.Fatalf("Lock with a panicking OnConflict = %v, want ErrConflict", err)
	}
	errs := f.logs.Records().Level(slog.LevelError)
	if seen.Load() != 2 || len(errs) != 2 || len(errs.Containing("OnDuplicate hook panicked")) != 1 || len(errs.Containing("OnConflict hook panicked")) != 1 {
		t.Fatalf("hook calls = %d, ERROR lines:\n%s\nwant 2 calls and one line for each hook", seen.Load(), errs)
	}
}

func TestDisabledPassesThrough(t *testing.T) {
	for _, env := range []string{"", "1", "true", "YES", "on"} {
		t.Run("env="+env, func(t *testing.T) {
			t.Setenv("IDEMGATE_DISABLED", env)
			st, _ := memstore.New(nil)
			fs := &faulty{Store: st}
			fs.failClaim.Store(true) // proves the store is never called
			l := &logs{}
			g, err := gateway.New(fs, &gateway.Options{Disabled: env == "", Logger: l.logger()})
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			for range 2 {
				if err := g.Lock(t.Context(), "m1", counter(&runs)); err != nil {
					t.Fatal(err)
				}
				if err := g.Mutex(t.Context(), "m1", counter(&runs)); err != nil {
					t.Fatal(err)
				}
			}
			if runs.Load() != 4 {
				t.Fatalf("ran %d times, want 4 (unguarded)", runs.Load())
			}
			if len(l.lines(t, "WARN")) != 5 {
				t.Fatalf("WARN lines = %d, want 5 (one at New, one per call)", len(l.lines(t, "WARN")))
			}
		})
	}
	t.Run("env=0", func(t *testing.T) {
		t.Setenv("IDEMGATE_DISABLED", "0")
		f := newFixture(t, gateway.Options{})
		f.g.Lock(t.Context(), "m1", counter(new(atomic.Int32)))
		if err := f.g.Lock(t.Context(), "m1", counter(new(atomic.Int32))); !errors.Is(err, gateway.ErrDuplicate) {
			t.Fatalf("IDEMGATE_DISABLED=0 must keep the guard: got %v", err)
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	st, _ := memstore.New(nil)
	for name, o := range map[string]*gateway.Options{
		"negative lease":          {Lease: -1},
		"negative settle timeout": {SettleTimeout: -1},
		"renewed lease too short": {Lease: time.Millisecond},
	} {
		if _, err := gateway.New(st, o); err == nil {
			t.Errorf("New with %s succeeded, want an error", name)
		}
	}
	if _, err := gateway.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	// The shortest renewed lease New names is itself accepted.
	_, err := gateway.New(st, &gateway.Options{Lease: time.Millisecond})
	shortest, perr := time.ParseDuration(err.Error()[strings.LastIndex(err.Error(), " ")+1:])
	if perr != nil {
		t.Fatalf("New with a renewed lease too short = %v; want an error ending with the shortest lease", err)
	}
	if _, err := gateway.New(st, &gateway.Options{Lease: shortest}); err != nil {
		t.Errorf("New with the shortest renewed lease %v = %v, want it accepted", shortest, err)
	}
	if _, err := gateway.New(st, &gateway.Options{Lease: shortest, NoRenew: true}); err != nil {
		t.Errorf("New with NoRenew = %v, want any lease accepted", err)
	}
	if _, err := gateway.New(st, &gateway.Options{Lease: time.Millisecond, NoRenew: true}); err != nil {
		t.Errorf("New with a 1ms lease and NoRenew = %v, want it accepted: the shortest lease is for renewals", err)
	}
	g, err := gateway.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	err = g.Lock(context.Background(), "default-lease", func(ctx context.Context) error {
		c, _ := gateway.ClaimFromContext(ctx)
		if lease := c.LeaseUntil.Sub(before); lease < gateway.DefaultRenewedLease || lease > gateway.DefaultRenewedLease+time.Second {
			t.Errorf("New over an Extender: the claim's lease is %v, want DefaultRenewedLease", lease)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A nil function is refused at once, with a message that says so, not by
// a nil dereference after a claim was won; a negative option names its
// field.
func TestNilFunctionsAndNegativeOptions(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	for name, call := range map[string]func(){
		"Lock":       func() { f.g.Lock(t.Context(), "k", nil) },
		"Mutex":      func() { f.g.Mutex(t.Context(), "k", nil) },
		"Idempotent": func() { f.g.Idempotent(nil) },
		"Push":       func() { f.g.Push(nil) },
	} {
		func() {
			defer func() {
				if p, _ := recover().(string); p != "gateway: "+name+" with a nil function" && p != "gateway: "+name+" with a nil handler" {
					t.Errorf("%s(nil) panicked with %q", name, p)
				}
			}()
			call()
		}()
	}
	if rec, ok, _ := f.st.Inspect(t.Context(), "k"); ok {
		t.Errorf("a nil function left a record: %+v", rec)
	}
	for _, tc := range []struct {
		opts gateway.Options
		want string
	}{{gateway.Options{Lease: -1}, "Options.Lease"}, {gateway.Options{SettleTimeout: -1}, "Options.SettleTimeout"}, {gateway.Options{MaxBodyBytes: -1}, "Options.MaxBodyBytes"}} {
		if _, err := gateway.New(f.st, &tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.opts, err, tc.want)
		}
	}
}

// A body whose transaction was fenced out while no other claim holds the
// key (the transaction ran on another database, say) fails, to be retried,
// even when its own claim still looks live because its release failed:
// only another live claim is a holder that may do the work instead.
func TestLockFencedWithItsOwnClaimStillLive(t *testing.T) {
	mem, _ := memstore.New(nil)
	fs := &faulty{Store: mem}
	fs.failRelease.Store(true)
	g, err := gateway.New(fs, &gateway.Options{NoRenew: true, Logger: (&logs{}).logger()})
	if err != nil {
		t.Fatal(err)
	}
	errTx := fmt.Errorf("ledger insert: %w", store.ErrFenced)
	err = g.Lock(t.Context(), "k", func(context.Context) error { return errTx })
	if !errors.Is(err, store.ErrFenced) || errors.Is(err, gateway.ErrInProgress) {
		t.Errorf("Lock = %v; want the body's ErrFenced, not in progress: no other claim holds the key", err)
	}
	if rec, _, _ := mem.Inspect(t.Context(), "k"); rec.State != store.Claimed || !rec.LeaseUntil.After(rec.ReadAt) {
		t.Fatalf("record %+v; want the body's own claim left live by the failed release", rec)
	}
}

// A release that fails is logged at WARN, since the key then frees only
// when its lease ends; one that succeeds says nothing.
func TestLockReleaseFailureIsLogged(t *testing.T) {
	for _, fail := range []bool{false, true} {
		mem, _ := memstore.New(nil)
		fs := &faulty{Store: mem}
		fs.failRelease.Store(fail)
		l := &logs{}
		g, err := gateway.New(fs, &gateway.Options{NoRenew: true, Logger: l.logger()})
		if err != nil {
			t.Fatal(err)
		}
		g.Lock(t.Context(), "k", func(context.Context) error { return errInjected })
		if n := len(l.Records().Level(slog.LevelWarn).Containing("release failed")); n != map[bool]int{false: 0, true: 1}[fail] || fs.releases.Load() != 1 {
			t.Errorf("release failing %v: %d release failed lines after %d Releases; want one line exactly when it fails, after one Release", fail, n, fs.releases.Load())
		}
	}
}

// A body whose context was cancelled for a lost lease and that returns nil
// anyway is not recorded done: Lock returns the cause, the claim is
// released, and a redelivery runs the work.
func TestLeaseLostBodyIsNotCompleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.failExtend.Store(true)
		g, err := gateway.New(fs, &gateway.Options{Logger: (&logs{}).logger()})
		if err != nil {
			t.Fatal(err)
		}
		err = g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			<-ctx.Done()
			return nil // bails out without saying why
		})
		if !errors.Is(err, gateway.ErrLeaseLost) {
			t.Fatalf("Lock = %v, want ErrLeaseLost", err)
		}
		if rec, _, _ := st.Inspect(t.Context(), "m1"); rec.State == store.Done {
			t.Fatalf("record %+v: a body that lost its lease was recorded DONE", rec)
		}
		fs.failExtend.Store(false)
		var runs atomic.Int32
		if err := g.Lock(t.Context(), "m1", counter(&runs)); err != nil || runs.Load() != 1 {
			t.Fatalf("redelivery = %v (ran %d), want one run", err, runs.Load())
		}
	})
}

// A Claim whose reply came after the whole lease had passed may have
// lapsed, and another delivery may hold the key: the body does not start,
// the claim is released, and the delivery fails as for a store error.
func TestLateClaimDoesNotStartTheBody(t *testing.T) {
	for _, renew := range []bool{false, true} {
		t.Run(fmt.Sprint("renew=", renew), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, _ := memstore.New(nil)
				const lease = time.Second
				fs := &faulty{Store: st, claimDelay: lease}
				g, err := gateway.New(fs, &gateway.Options{Lease: lease, NoRenew: !renew, Logger: (&logs{}).logger()})
				if err != nil {
					t.Fatal(err)
				}
				var runs atomic.Int32
				if err := g.Lock(t.Context(), "m1", counter(&runs)); !errors.Is(err, gateway.ErrStore) || runs.Load() != 0 {
					t.Fatalf("Lock after a Claim that took the whole lease = %v (ran %d), want ErrStore and no run", err, runs.Load())
				}
				if fs.releases.Load() != 1 {
					t.Fatalf("%d releases, want the late claim released", fs.releases.Load())
				}
				fs.claimDelay = 0
				if err := g.Lock(t.Context(), "m1", counter(&runs)); err != nil || runs.Load() != 1 {
					t.Fatalf("redelivery = %v (ran %d), want one run", err, runs.Load())
				}
			})
		})
	}
}

// While a failing Complete is tried again, the renewal keeps the claim
// alive: a redelivery after the lease is in progress, not a second run.
func TestCompleteRetriesKeepTheClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.completeFailures.Store(8) // about 4.5 s of retries
		const lease = 2 * time.Second
		g, err := gateway.New(fs, &gateway.Options{Lease: lease, Logger: (&logs{}).logger()})
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int32
		done := make(chan error)
		go func() { done <- g.Lock(context.Background(), "m1", counter(&runs)) }()
		time.Sleep(2 * lease)
		if c, err := st.Claim(context.Background(), "m1", lease, store.ClaimOptions{}); err != nil || c.Status != store.HeldByOther {
			t.Errorf("a redelivery two leases into Complete's retries = %v, %v; want HeldByOther", c.Status, err)
		}
		if err := <-done; err != nil || runs.Load() != 1 {
			t.Fatalf("Lock = %v (ran %d)", err, runs.Load())
		}
		if rec, _, _ := st.Inspect(context.Background(), "m1"); rec.State != store.Done {
			t.Fatalf("record %+v, want DONE", rec)
		}
	})
}

// Once the body hands its claim to a transaction (store.EnterTx, which
// every CompleteTx calls), the renewal stops, and the body is never
// cancelled for the lease it no longer renews; its transaction may outlive
// the lease and still commit. (A body's ErrFenced is held by
// TestGuardOutcomes and TestPushFencedOutTransactionWaitsForTheHolder.)
func TestTransactionOutlivesTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		l := &logs{}
		const lease = time.Second
		g, err := gateway.New(fs, &gateway.Options{Lease: lease, Logger: l.logger()})
		if err != nil {
			t.Fatal(err)
		}
		err = g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			c, _ := gateway.ClaimFromContext(ctx)
			store.EnterTx(c) // as CompleteTx does
			before := fs.extends.Load()
			time.Sleep(3 * lease) // a long transaction
			if err := context.Cause(ctx); err != nil {
				return fmt.Errorf("the body was cancelled: %w", err)
			}
			if n := fs.extends.Load() - before; n != 0 {
				return fmt.Errorf("%d renewals after the claim entered a transaction", n)
			}
			_, err := st.Complete(context.Background(), c) // the commit
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if lines := l.Records().Level(slog.LevelError); len(lines) != 0 {
			t.Errorf("ERROR lines:\n%s", lines)
		}
	})
}

// Item 14 is in TestGuardOutcomes: a body's ErrFenced is acked only when
// the record is DONE; while another live claim holds the key it is in
// progress (TestPushFencedOutTransactionWaitsForTheHolder too).
