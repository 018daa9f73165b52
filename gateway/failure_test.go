package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/claimwatch"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// failWith is a body that counts its runs and fails with err.
func failWith(runs *atomic.Int32, err error) func(context.Context) error {
	return func(context.Context) error { runs.Add(1); return err }
}

// The attempt budget: failures below it release the key and are counted
// in the record; the one that spends it makes the record FAILED; a later
// delivery does not run the work and gets a *FailedError.
func TestMaxAttemptsSpent(t *testing.T) {
	f := newFixture(t, gateway.Options{MaxAttempts: 3})
	ctx := gateway.WithOrigin(t.Context(), "push/m-3")
	var runs atomic.Int32
	boom := errors.New("supplier answered 500")
	for i := range 3 {
		if err := f.g.Lock(ctx, "order-1", failWith(&runs, boom)); !errors.Is(err, boom) {
			t.Fatalf("attempt %d: Lock = %v, want the work's error", i+1, err)
		}
	}
	err := f.g.Lock(ctx, "order-1", failWith(&runs, nil))
	fe, ok := errors.AsType[*gateway.FailedError](err)
	if !ok || !errors.Is(err, gateway.ErrFailed) {
		t.Fatalf("Lock of a FAILED key = %v, want a *FailedError matching ErrFailed", err)
	}
	if runs.Load() != 3 {
		t.Errorf("the work ran %d times, want 3: the budget", runs.Load())
	}
	if fe.Attempts != 3 || fe.Reason != boom.Error() || fe.FailedBy != "push/m-3" {
		t.Errorf("FailedError = %+v, want 3 attempts, the reason %q, failed by push/m-3", fe, boom)
	}
	r, _, _ := f.st.Inspect(ctx, "order-1")
	if r.State != store.Failed || r.Attempts != 3 {
		t.Errorf("record = %v with %d attempts, want FAILED with 3", r.State, r.Attempts)
	}
	lines := f.logs.lines(t, "ERROR")
	if last := lines[len(lines)-1]; last["why"] != "max_attempts" || last["attempts"] != float64(3) || last["outcome"] != "abandoned" {
		t.Errorf("the ERROR line of the spent budget = %v, want outcome abandoned, why max_attempts, attempts 3", last)
	}
}

// Permanent and the Terminal classifier make the record FAILED at the
// first failure, with or without a budget; an operator's Retry lets the
// next delivery run once.
func TestTerminalFailuresAndRetry(t *testing.T) {
	customerGone := errors.New("customer gone")
	for name, tc := range map[string]struct {
		opts gateway.Options
		err  error
	}{
		"Permanent":                {gateway.Options{}, gateway.Permanent(customerGone)},
		"Permanent wrapped":        {gateway.Options{MaxAttempts: 9}, errors.Join(errors.New("order o-1"), gateway.Permanent(customerGone))},
		"Terminal":                 {gateway.Options{Terminal: func(err error) bool { return errors.Is(err, customerGone) }}, customerGone},
		"Terminal beside a budget": {gateway.Options{MaxAttempts: 5, Terminal: func(err error) bool { return errors.Is(err, customerGone) }}, customerGone},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.opts)
			var runs atomic.Int32
			if err := f.g.Lock(t.Context(), "k", failWith(&runs, tc.err)); !errors.Is(err, customerGone) {
				t.Fatalf("Lock = %v, want the work's error", err)
			}
			if err := f.g.Lock(t.Context(), "k", failWith(&runs, nil)); !errors.Is(err, gateway.ErrFailed) {
				t.Fatalf("the second Lock = %v, want ErrFailed", err)
			}
			if ok, err := f.st.Retry(t.Context(), "k"); !ok || err != nil {
				t.Fatalf("Retry = %v, %v", ok, err)
			}
			if err := f.g.Lock(t.Context(), "k", failWith(&runs, nil)); err != nil {
				t.Fatalf("Lock after Retry = %v, want the work to run", err)
			}
			if err := f.g.Lock(t.Context(), "k", failWith(&runs, nil)); !errors.Is(err, gateway.ErrDuplicate) {
				t.Fatalf("Lock after the retried work = %v, want ErrDuplicate", err)
			}
			if runs.Load() != 2 {
				t.Errorf("the work ran %d times, want twice: the failure and the retried run", runs.Load())
			}
		})
	}
}

// Without a budget or a terminal error, a failure only releases: nothing
// is counted, as before FAILED existed. With a budget, a fenced-out
// transaction is not the message's failure and is not counted; a caller
// whose context ended (a push past its ack deadline) and a panic are.
func TestWhichFailuresCount(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var runs atomic.Int32
	f.g.Lock(t.Context(), "plain", failWith(&runs, errors.New("boom")))
	if r, _, _ := f.st.Inspect(t.Context(), "plain"); r.Attempts != 0 || !r.Released() {
		t.Errorf("a failure without a budget: %d attempts, released %v; want 0, released", r.Attempts, r.Released())
	}

	f = newFixture(t, gateway.Options{MaxAttempts: 1})
	f.g.Lock(t.Context(), "fenced", func(context.Context) error { return store.ErrFenced })
	if r, _, _ := f.st.Inspect(t.Context(), "fenced"); r.Attempts != 0 || r.State != store.Claimed {
		t.Errorf("a fenced-out transaction: %v with %d attempts, want a released claim without any", r.State, r.Attempts)
	}
	ctx, cancel := context.WithCancel(t.Context())
	f.g.Lock(ctx, "cancelled", func(context.Context) error { cancel(); return context.Canceled })
	if r, _, _ := f.st.Inspect(t.Context(), "cancelled"); r.State != store.Failed || r.Attempts != 1 {
		t.Errorf("a failure of a cancelled caller under a budget of 1: %v with %d attempts, want FAILED after 1", r.State, r.Attempts)
	}
	func() {
		defer func() { recover() }()
		f.g.Lock(t.Context(), "panics", func(context.Context) error { panic("nil order") })
	}()
	r, _, _ := f.st.Inspect(t.Context(), "panics")
	if r.State != store.Failed || r.Attempts != 1 || !strings.Contains(r.Reason, "panicked") {
		t.Errorf("a panic under a budget of 1: %v with %d attempts, reason %q; want FAILED after 1, the reason naming the panic", r.State, r.Attempts, r.Reason)
	}
}

// A store that keeps no failures cannot count attempts: New refuses the
// budget rather than ignore it.
func TestMaxAttemptsNeedsAFailer(t *testing.T) {
	st := newFixture(t, gateway.Options{}).st
	if _, err := gateway.New(&faulty{Store: st}, &gateway.Options{MaxAttempts: 3}); err == nil {
		t.Fatal("New accepted MaxAttempts over a store without store.Failer")
	}
	for _, bad := range []gateway.Options{{MaxAttempts: -1}, {WaitForHolder: -time.Second}} {
		if _, err := gateway.New(st, &bad); err == nil {
			t.Errorf("New accepted %+v", bad)
		}
	}
}

// The reason a FAILED record keeps holds no key under HideKeys, nor does
// the *FailedError a later Lock returns.
func TestFailureReasonHidesKeys(t *testing.T) {
	f := newFixture(t, gateway.Options{HideKeys: true})
	key := "alice@example.com"
	f.g.Lock(t.Context(), key, func(context.Context) error {
		return gateway.Permanent(errors.New("no customer " + key + "\nin the CRM"))
	})
	r, _, _ := f.st.Inspect(t.Context(), key)
	if r.State != store.Failed || strings.Contains(r.Reason, key) || !strings.Contains(r.Reason, "no customer sha256:") {
		t.Errorf("record = %v, reason %q; want FAILED, the key's digest in place of the key", r.State, r.Reason)
	}
	if err := store.CheckReason(r.Reason); err != nil {
		t.Errorf("the kept reason is no printable line: %v", err)
	}
	err := f.g.Lock(t.Context(), key, counter(new(atomic.Int32)))
	if fe, ok := errors.AsType[*gateway.FailedError](err); !ok || strings.Contains(err.Error(), key) || fe.Key == key {
		t.Errorf("Lock of the FAILED key = %v, want a *FailedError without the key", err)
	}
}

// A wrapped handler's failure status is what a Terminal classifier judges
// (HandlerStatus); the FAILED key's deliveries then answer 422, without
// running the handler, or 204 with AckFailed.
func TestIdempotentTerminalStatus(t *testing.T) {
	for _, ack := range []bool{false, true} {
		var runs atomic.Int32
		f := newFixture(t, gateway.Options{AckFailed: ack, Terminal: func(err error) bool {
			code, ok := gateway.HandlerStatus(err)
			return ok && code == http.StatusUnprocessableEntity
		}})
		h := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			http.Error(w, "unknown product", http.StatusUnprocessableEntity)
		}))
		first, second := status(h, wrapped("m-1", "x", nil)), status(h, wrapped("m-1", "x", nil))
		want := http.StatusUnprocessableEntity
		if ack {
			want = http.StatusNoContent
		}
		if first != want || second != want || runs.Load() != 1 {
			t.Errorf("AckFailed %v: answers %d, %d with %d runs; want %d twice and one run", ack, first, second, runs.Load(), want)
		}
	}
	if _, ok := gateway.HandlerStatus(errors.New("not a handler's")); ok {
		t.Error("HandlerStatus found a status in an error that has none")
	}
}

// idemgate.failures counts the records gone FAILED by reason and route.
func TestFailureMetric(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	f := newFixture(t, gateway.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), MaxAttempts: 2})
	h := f.g.Push(func(context.Context, *pushenvelope.Message) error { return errors.New("boom") })
	serve := func(id string) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(push(id, nil, "x"))))
	}
	serve("m-1")
	serve("m-1") // the budget of 2 is spent
	serve("m-1") // already failed: not counted again
	f.g.Lock(t.Context(), "direct", func(context.Context) error { return gateway.Permanent(errors.New("bad")) })

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "idemgate.failures" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				why, _ := p.Attributes.Value(attribute.Key("reason"))
				route, _ := p.Attributes.Value(attribute.Key("route"))
				got[why.AsString()+" "+route.AsString()] += p.Value
			}
		}
	}
	want := map[string]int64{"max_attempts /orders": 1, "permanent ": 1}
	if len(got) != len(want) || got["max_attempts /orders"] != 1 || got["permanent "] != 1 {
		t.Errorf("idemgate.failures = %v, want %v", got, want)
	}
}

// waitingGateway returns a gateway whose deliveries wait a minute for a
// live holder, over a store that tells when a Claim met one.
func waitingGateway(t *testing.T) (*claimwatch.Store, *gateway.Gateway) {
	t.Helper()
	st, err := claimwatch.New()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(st, &gateway.Options{Logger: (&logs{}).logger(), WaitForHolder: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return st, g
}

// A copy that meets a live holder waits for it with WaitForHolder: a
// holder that releases (its work failed) lets the copy claim the key and
// run; one that never settles leaves the copy in progress once the wait
// is over; never are two bodies at work.
func TestWaitForHolder(t *testing.T) {
	st, g := waitingGateway(t)
	var busy, runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	body := func(ctx context.Context) error {
		if busy.Add(1) != 1 {
			t.Error("two bodies at work on one key")
		}
		defer busy.Add(-1)
		if runs.Add(1) == 1 {
			close(started)
			<-release
			return errors.New("supplier down")
		}
		return nil
	}
	first := make(chan error, 1)
	go func() { first <- g.Lock(t.Context(), "k", body) }()
	<-started
	copied := make(chan error, 1)
	go func() { copied <- g.Lock(t.Context(), "k", body) }()
	<-st.Held()
	close(release)
	if err := <-first; err == nil {
		t.Error("the holder's failure was lost")
	}
	if err := <-copied; err != nil {
		t.Errorf("the waiting copy = %v, want it to claim the released key and run", err)
	}
	if runs.Load() != 2 {
		t.Errorf("%d runs, want 2: the failed holder's and the copy's", runs.Load())
	}

	// A holder that never settles: the wait ends at its bound, or at half
	// the caller's deadline, whichever is sooner.
	hold := make(chan struct{})
	defer close(hold)
	held := make(chan struct{})
	go g.Lock(t.Context(), "stuck", func(context.Context) error { close(held); <-hold; return nil })
	<-held
	short := g.Route(&gateway.RouteOptions{WaitForHolder: 50 * time.Millisecond})
	start := time.Now()
	err := short.Lock(t.Context(), "stuck", counter(new(atomic.Int32)))
	if !errors.Is(err, gateway.ErrInProgress) || time.Since(start) < 50*time.Millisecond {
		t.Errorf("a wait for a stuck holder = %v after %v; want ErrInProgress after the 50ms bound", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start = time.Now()
	err = g.Lock(ctx, "stuck", counter(new(atomic.Int32)))
	if took := time.Since(start); !errors.Is(err, gateway.ErrInProgress) || took < 500*time.Millisecond || took > 900*time.Millisecond {
		t.Errorf("a wait under a 1s deadline = %v after %v; want ErrInProgress at half the deadline, leaving the rest to the work", err, took)
	}
}

// A FAILED key stays FAILED for every caller of its payload; a delivery
// of another payload under the key is a conflict first (it is not the
// message that failed), and Mutex meets the key as work it must not run
// over.
func TestFailedKeyMeetsEveryCaller(t *testing.T) {
	var conflicts atomic.Int32
	f := newFixture(t, gateway.Options{OnConflict: func(context.Context, string, []byte, []byte) { conflicts.Add(1) }})
	ctx := gateway.WithFingerprint(t.Context(), []byte("payload-1"))
	f.g.Lock(ctx, "k", func(context.Context) error { return gateway.Permanent(errors.New("bad")) })
	var runs atomic.Int32
	if err := f.g.Lock(ctx, "k", counter(&runs)); !errors.Is(err, gateway.ErrFailed) {
		t.Errorf("Lock of a FAILED key with its payload = %v, want ErrFailed", err)
	}
	other := gateway.WithFingerprint(t.Context(), []byte("payload-2"))
	err := f.g.Lock(other, "k", counter(&runs))
	if ce, ok := errors.AsType[*gateway.ConflictError](err); !ok || !ce.Failed || ce.Done {
		t.Errorf("Lock of a FAILED key with another payload = %v, want a *ConflictError with Failed", err)
	}
	if conflicts.Load() != 1 {
		t.Errorf("OnConflict ran %d times, want once: for the other payload", conflicts.Load())
	}
	err = f.g.Mutex(t.Context(), "k", counter(&runs))
	if ip, ok := errors.AsType[*gateway.InProgressError](err); !ok || !ip.Done {
		t.Errorf("Mutex of a FAILED key = %v, want an *InProgressError with Done", err)
	}
	if runs.Load() != 0 {
		t.Errorf("the work ran %d times on a FAILED key", runs.Load())
	}
}

// On a route with a Fingerprint and AckFailed, another payload sent under
// a FAILED key is refused as a conflict (409, outcome conflict), never
// acknowledged as the failed one: it never ran and never failed. With
// AcceptConflicts, which accepts only done work in a conflict's place, it
// is asked to come back (503).
func TestConflictOnFailedKeyNotAcked(t *testing.T) {
	for _, accept := range []bool{false, true} {
		f := newFixture(t, gateway.Options{AckFailed: true, AcceptConflicts: accept,
			Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintData()})
		var runs atomic.Int32
		h := f.g.Push(func(context.Context, *pushenvelope.Message) error {
			runs.Add(1)
			return gateway.Permanent(errors.New("unknown product"))
		})
		order := map[string]string{"order_id": "o-1"}
		wantStatus(t, deliver(t, h, push("m-1", order, "first order")), http.StatusNoContent, "the failure, acked with AckFailed")
		wantStatus(t, deliver(t, h, push("m-2", order, "first order")), http.StatusNoContent, "a copy of the failed message, acked with AckFailed")
		want, outcome := http.StatusConflict, "conflict"
		if accept {
			want, outcome = http.StatusServiceUnavailable, "in_progress"
		}
		wantStatus(t, deliver(t, h, push("m-3", order, "another order")), want, "another payload under the FAILED key")
		if runs.Load() != 1 {
			t.Errorf("AcceptConflicts %v: the work ran %d times, want once", accept, runs.Load())
		}
		recs := f.logs.Records()
		if got := recs[len(recs)-1].Outcome(); got != outcome {
			t.Errorf("AcceptConflicts %v: the other payload's outcome = %q, want %q", accept, got, outcome)
		}
	}
}

// Contention is not a failure: work whose own Mutex (or a Lock on another
// key) meets a live holder, or a handler that answers busy, is released
// without spending the key's attempt budget, however often it happens.
func TestContentionNotCounted(t *testing.T) {
	f := newFixture(t, gateway.Options{MaxAttempts: 2})
	hold, held, freed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(freed)
		f.g.Mutex(t.Context(), "account:7", func(context.Context) error { close(held); <-hold; return nil })
	}()
	<-held
	var runs atomic.Int32
	pay := func(ctx context.Context) error {
		runs.Add(1)
		return f.g.Mutex(ctx, "account:7", func(context.Context) error { return nil })
	}
	for i := range 5 {
		if err := f.g.Lock(t.Context(), "payment-1", pay); !errors.Is(err, gateway.ErrInProgress) {
			t.Fatalf("delivery %d while the account is held = %v, want its Mutex's ErrInProgress", i+1, err)
		}
	}
	// A handler that answers 500 for any error, its Mutex's included:
	// the gateway saw the contention itself.
	lazy := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f.g.Mutex(r.Context(), "account:7", func(context.Context) error { return nil }); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	for range 3 {
		wantStatus(t, deliver(t, lazy, push("m-lazy", nil, "x")), http.StatusInternalServerError, "a handler answering 500 for its Mutex's contention")
	}
	if r, _, _ := f.st.Inspect(t.Context(), "m-lazy"); r.State == store.Failed || r.Attempts != 0 {
		t.Errorf("a key whose handler answered 500 for its Mutex's contention = %v with %d attempts, want none counted", r.State, r.Attempts)
	}
	close(hold)
	<-freed
	if err := f.g.Lock(t.Context(), "payment-1", pay); err != nil {
		t.Fatalf("the delivery after the account freed = %v, want the payment to run and succeed: contention spent its budget", err)
	}
	if r, _, _ := f.st.Inspect(t.Context(), "payment-1"); r.State != store.Done || r.Attempts != 0 {
		t.Errorf("payment-1 = %v with %d attempts, want DONE with none counted", r.State, r.Attempts)
	}

	busy := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "account busy", http.StatusServiceUnavailable)
	}))
	for range 3 {
		wantStatus(t, deliver(t, busy, push("m-busy", nil, "x")), http.StatusServiceUnavailable, "a handler answering busy")
	}
	if r, _, _ := f.st.Inspect(t.Context(), "m-busy"); r.State == store.Failed || r.Attempts != 0 {
		t.Errorf("a key whose handler answered busy 3 times = %v with %d attempts, want none counted", r.State, r.Attempts)
	}
}

// A Terminal classifier that panics is logged, and the failure counts as
// an attempt: the claim is settled, not left held until its lease lapses.
func TestTerminalPanicSettles(t *testing.T) {
	f := newFixture(t, gateway.Options{MaxAttempts: 3, Terminal: func(error) bool { panic("classifier bug") }})
	if err := f.g.Lock(t.Context(), "k", func(context.Context) error { return errors.New("boom") }); err == nil {
		t.Fatal("Lock = nil, want the work's error")
	}
	if r, _, _ := f.st.Inspect(t.Context(), "k"); !r.Released() || r.Attempts != 1 {
		t.Errorf("record after the classifier panicked = %+v, want released with one attempt counted", r)
	}
	if len(f.logs.Records().Level(slog.LevelError).Where(func(r logtest.Record) bool { return strings.Contains(r.Message, "Terminal hook panicked") })) != 1 {
		t.Errorf("no ERROR line for the classifier's panic:\n%s", f.logs.Records())
	}
}

// A route can turn off what the Gateway turns on: MaxAttempts and
// WaitForHolder with a negative value, Terminal with a classifier that
// says no.
func TestRouteTurnsFailureOptionsOff(t *testing.T) {
	f := newFixture(t, gateway.Options{MaxAttempts: 1, WaitForHolder: time.Hour, Terminal: func(error) bool { return true }})
	r := f.g.Route(&gateway.RouteOptions{MaxAttempts: -1, WaitForHolder: -1, Terminal: func(error) bool { return false }})
	for range 3 {
		r.Lock(t.Context(), "k", func(context.Context) error { return errors.New("boom") })
	}
	if rec, _, _ := f.st.Inspect(t.Context(), "k"); rec.State == store.Failed || rec.Attempts != 0 {
		t.Errorf("record after 3 failures on a route with MaxAttempts and Terminal off = %v, %d attempts; want released, none counted", rec.State, rec.Attempts)
	}
	hold := make(chan struct{})
	defer close(hold)
	held := make(chan struct{})
	go r.Lock(t.Context(), "held", func(context.Context) error { close(held); <-hold; return nil })
	<-held
	if err := r.Lock(t.Context(), "held", counter(new(atomic.Int32))); !errors.Is(err, gateway.ErrInProgress) {
		t.Errorf("a copy on a route with WaitForHolder off = %v, want ErrInProgress at once", err)
	}
}

// countingFaulty is a faulty store that keeps failures: its Fail and
// Retry are the wrapped memstore's.
type countingFaulty struct {
	*faulty
	mem *memstore.Store
}

func (c countingFaulty) Fail(ctx context.Context, cl store.Claim, f store.Failure) (int, bool, error) {
	return c.mem.Fail(ctx, cl, f)
}
func (c countingFaulty) Retry(ctx context.Context, key string) (bool, error) {
	return c.mem.Retry(ctx, key)
}

// A body cancelled because its claim was lost (the renewal failed) is not
// the message's failure: under a budget of one, its key is released, not
// FAILED.
func TestLostLeaseNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		fs := &faulty{Store: mem}
		fs.failExtend.Store(true)
		g, err := gateway.New(countingFaulty{fs, mem}, &gateway.Options{Logger: (&logs{}).logger(), MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		g.Lock(t.Context(), "m1", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		if r, _, _ := mem.Inspect(t.Context(), "m1"); r.State != store.Claimed || r.Attempts != 0 {
			t.Errorf("after a lost lease: %v with %d attempts, want a released claim without any", r.State, r.Attempts)
		}
	})
}
