package gateway_test

// Regression tests for the defects of issue 21, "The guarantee, second
// pass", that live in Lock and its renewal. Each names its item.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// Item 1, on the HTTP surface: under AcceptConflicts a conflict with a
// record that is only held is not acked. The holder may yet fail and
// release the key; then this payload is the one to run.
func TestAcceptConflictsNacksAHeldKey(t *testing.T) {
	f := newFixture(t, gateway.Options{Key: gateway.KeyFromAttribute("order_id"),
		Fingerprint: gateway.FingerprintPayload, AcceptConflicts: true})
	var runs atomic.Int32
	h := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) }))
	first := push("1", map[string]string{"order_id": "7"}, "2 chairs")
	m, err := pushenvelope.Decode(httpRequest(first), 0)
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := gateway.FingerprintPayload(m)
	holder, err := f.st.Claim(t.Context(), "order_id:7", time.Minute, store.ClaimOptions{Fingerprint: fp})
	if err != nil || holder.Status != store.Won {
		t.Fatalf("the first payload's claim = %v, %v", holder.Status, err)
	}

	other := push("2", map[string]string{"order_id": "7"}, "3 tables")
	wantStatus(t, deliver(t, h, other), http.StatusServiceUnavailable, "a conflict with a held key")

	// The holder fails: the other payload runs on its redelivery.
	if err := f.st.Release(t.Context(), holder); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, deliver(t, h, other), http.StatusOK, "the other payload once the holder released")
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
	// Against a DONE record the conflict is accepted, as documented.
	wantStatus(t, deliver(t, h, first), http.StatusNoContent, "a conflict with a done key")
}

func httpRequest(body string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	return r
}

// Item 2: the route's fingerprint belongs to the route's key. A Lock the
// body takes on another key compares nothing, and keeps no fingerprint.
func TestNestedLockIgnoresTheRouteFingerprint(t *testing.T) {
	f := newFixture(t, gateway.Options{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload})
	doneWith(t, f.st, "welcome-mail:c-42", "some other fingerprint")
	var nested, fresh error
	h := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nested = f.g.Lock(r.Context(), "welcome-mail:c-42", func(context.Context) error { return nil })
		fresh = f.g.Lock(r.Context(), "invoice:c-42", func(context.Context) error { return nil })
	}))
	wantStatus(t, deliver(t, h, push("1", map[string]string{"order_id": "7"}, "2 chairs")), http.StatusOK, "the route")
	if !errors.Is(nested, gateway.ErrDuplicate) {
		t.Errorf("nested Lock on a done key = %v, want ErrDuplicate", nested)
	}
	if fresh != nil {
		t.Fatalf("nested Lock on a fresh key = %v", fresh)
	}
	if rec, ok, err := f.st.Inspect(t.Context(), "invoice:c-42"); err != nil || !ok || rec.Fingerprint != nil {
		t.Errorf("the nested key's record = %+v, %v, %v; want one without a fingerprint", rec, ok, err)
	}
}

// Item 3: a body whose context was cancelled for a lost lease and that
// returns nil anyway is not recorded done: Lock returns the cause, the
// claim is released, and a redelivery runs the work.
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

// Item 3, on HTTP: a handler that returns on ctx.Done without writing is
// answered 500, not 200.
func TestLeaseLostHandlerIsNotAcked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.failExtend.Store(true)
		g, _ := gateway.New(fs, &gateway.Options{Logger: (&logs{}).logger()})
		h := g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		wantStatus(t, deliver(t, h, push("1", nil, "x")), http.StatusInternalServerError, "a handler that lost its lease")
		// One that answered 200 before its lease was lost: the 200 is
		// held, and must not go out (the simulator found this one).
		h = g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			<-r.Context().Done()
		}))
		wantStatus(t, deliver(t, h, push("2", nil, "x")), http.StatusInternalServerError, "a handler that answered 200, then lost its lease")
	})
}

// Item 4: a Claim whose reply came after the whole lease had passed may
// have lapsed, and another delivery may hold the key: the body does not
// start, the claim is released, and the delivery fails as for a store
// error.
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

// Item 9: while a failing Complete is tried again, the renewal keeps the
// claim alive: a redelivery after the lease is in progress, not a second
// run.
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

// Item 11: with HideKeys, no line the gateway logs holds the key, not even
// inside a store's error; nor does the error a direct Lock returns for
// work that did not run.
func TestHideKeysScrubsStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "customer-4111111111111111"
		st, _ := memstore.New(nil)
		ks := &keyErrors{faulty: faulty{Store: st}}
		ks.failRelease.Store(true)
		ks.failExtend.Store(true)
		ks.completeFailures.Store(1)
		l := &logs{}
		g, _ := gateway.New(ks, &gateway.Options{Logger: l.logger(), HideKeys: true, Lease: time.Second})
		_ = g.Lock(t.Context(), key, func(ctx context.Context) error { <-ctx.Done(); return errors.New("gave up") })
		_ = g.Lock(t.Context(), key+"-2", func(ctx context.Context) error { return nil })
		ks.failClaim.Store(true)
		err := g.Lock(t.Context(), key, func(context.Context) error { return nil })
		if err == nil || strings.Contains(err.Error(), key) {
			t.Errorf("Lock's store error = %v, want one without the key", err)
		}
		if len(l.Records()) < 4 {
			t.Fatalf("only %d lines; the test needs the renewal, release, complete and claim failures", len(l.Records()))
		}
		for _, r := range l.Records() {
			if strings.Contains(r.String(), key) {
				t.Errorf("line holds the key: %s", r)
			}
		}
	})
}

// keyErrors fails as faulty does, with errors that quote the key, as a
// store's errors may.
type keyErrors struct{ faulty }

func (s *keyErrors) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	c, err := s.faulty.Claim(ctx, key, lease, opts)
	return c, quote(key, err)
}

func (s *keyErrors) Complete(ctx context.Context, c store.Claim) (bool, error) {
	ok, err := s.faulty.Complete(ctx, c)
	return ok, quote(c.Key, err)
}

func (s *keyErrors) Release(ctx context.Context, c store.Claim) error {
	return quote(c.Key, s.faulty.Release(ctx, c))
}

func (s *keyErrors) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	nc, err := s.faulty.Extend(ctx, c, lease)
	return nc, quote(c.Key, err)
}

func quote(key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("record %q: %w", key, err)
}

// Item 17, in the gateway: once the body hands its claim to a transaction
// (store.EnterTx, which every CompleteTx calls), the renewal stops, and the
// body is never cancelled for the lease it no longer renews; its
// transaction may outlive the lease and still commit.
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

// Issue 22, item 8: without renewal, a Mutex body that outlives its lease
// may run beside the next caller. Mutex cannot stop it, but reports it:
// one ERROR line, outcome fenced_out; fn's nil is returned, since its work
// is done.
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

// Item 3 for Mutex: a body that returns nil after losing its lease did not
// hold the key all along; Mutex returns the cause.
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

// Issue 23 (API papercuts): a caller whose context ended before the key
// was claimed is not a store failure: outcome cancelled, one WARN line, no
// ERROR, and still a nack (503).
func TestCancelledCallerIsNotAStoreFailure(t *testing.T) {
	st, _ := memstore.New(nil)
	fs := &faulty{Store: st}
	fs.failClaim.Store(true) // the Claim fails as a network client's does on a cancelled context
	l := &logs{}
	g, _ := gateway.New(fs, &gateway.Options{Logger: l.logger()})
	h := g.Idempotent(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") }))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader(push("1", nil, "x"))))
	wantStatus(t, rec, http.StatusServiceUnavailable, "a cancelled caller")
	if lines := l.Records().Outcome(gateway.OutcomeCancelled); len(lines) != 1 || lines[0].Level != slog.LevelWarn {
		t.Errorf("want one WARN cancelled line, got:\n%s", l.Records())
	}
	if lines := l.Records().Level(slog.LevelError); len(lines) != 0 {
		t.Errorf("ERROR lines for a caller that went away:\n%s", lines)
	}
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
