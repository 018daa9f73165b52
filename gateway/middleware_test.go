package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// push is a wrapped Pub/Sub push body.
func push(id string, attrs map[string]string, data string) string {
	msg := map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(data)), "attributes": attrs, "publishTime": "2026-11-30T10:00:00.123456789Z"}
	if id != "" {
		msg["messageId"] = id
	}
	b, _ := json.Marshal(map[string]any{"message": msg, "subscription": "projects/p/subscriptions/s", "deliveryAttempt": 3})
	return string(b)
}

func deliver(t testing.TB, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	return rec
}

func wantStatus(t testing.TB, rec *httptest.ResponseRecorder, want int, why string) {
	t.Helper()
	if rec.Code != want {
		t.Fatalf("%s: status %d (%q), want %d", why, rec.Code, rec.Body.String(), want)
	}
}

// counting is a handler that counts its runs and answers status.
type counting struct {
	runs   atomic.Int32
	status atomic.Int32
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.runs.Add(1)
	if s := c.status.Load(); s != 0 {
		w.WriteHeader(int(s))
	}
}

func TestIdempotentOutcomes(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	h := &counting{}
	srv := f.g.Idempotent(h)

	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 200, "first delivery (handler wrote nothing)")
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 204, "redelivery")
	if h.runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.runs.Load())
	}

	h.status.Store(500)
	wantStatus(t, deliver(t, srv, push("2", nil, "x")), 500, "failing handler")
	h.status.Store(201)
	wantStatus(t, deliver(t, srv, push("2", nil, "x")), 201, "retry after failure (claim released)")
	wantStatus(t, deliver(t, srv, push("2", nil, "x")), 204, "redelivery after success")

	wantStatus(t, deliver(t, srv, "not json"), 400, "garbage body")
	wantStatus(t, deliver(t, srv, `{"nomessage":true}`), 400, "JSON without a message")
	wantStatus(t, deliver(t, srv, push("", nil, "x")), 500, "no messageId fails closed")

	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/", strings.NewReader(push("3", nil, "x"))))
	wantStatus(t, rec, 405, "PUT")
	if h.runs.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3", h.runs.Load())
	}
}

// A wrapped mux keeps its health checks: GET, HEAD and OPTIONS are never
// push deliveries and reach the handler untouched, with no claim.
func TestIdempotentPassesNonPushMethods(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		var claimed bool
		rec := httptest.NewRecorder()
		f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, claimed = gateway.ClaimFromContext(r.Context())
			w.WriteHeader(http.StatusTeapot)
		})).ServeHTTP(rec, httptest.NewRequest(method, "/healthz", nil))
		if rec.Code != http.StatusTeapot || claimed {
			t.Errorf("%s: status %d, claimed %v; want the handler's own 418, unclaimed", method, rec.Code, claimed)
		}
	}
}

// Route settings apply to that route only; the rest is the gateway's.
func TestRoute(t *testing.T) {
	f := newFixture(t, gateway.Options{MaxBodyBytes: 1 << 10})
	orders := f.g.Route(&gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")})
	h := &counting{}
	byOrder, byMessage := orders.Idempotent(h), f.g.Idempotent(h)
	wantStatus(t, deliver(t, byOrder, push("1", map[string]string{"order_id": "7"}, "x")), 200, "order 7")
	wantStatus(t, deliver(t, byOrder, push("2", map[string]string{"order_id": "7"}, "x")), 204, "order 7 republished under a new id")
	wantStatus(t, deliver(t, byMessage, push("2", map[string]string{"order_id": "7"}, "x")), 200, "the gateway's own key: message 2 is new")
	wantStatus(t, deliver(t, byOrder, push("3", map[string]string{"order_id": "8"}, strings.Repeat("x", 2<<10))), 413, "the gateway's body limit holds on the route")
	big := f.g.Route(&gateway.RouteOptions{MaxBodyBytes: 4 << 10}).Idempotent(h)
	wantStatus(t, deliver(t, big, push("4", nil, strings.Repeat("x", 2<<10))), 200, "the route's own body limit")
	if h.runs.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3", h.runs.Load())
	}
}

// A route's switches are tri-state: nil inherits the gateway's, and a
// route can turn off what the gateway turns on (and on what it leaves off).
func TestRouteSwitchesOverrideTheGateway(t *testing.T) {
	f := newFixture(t, gateway.Options{AllowUnguarded: true, AcceptConflicts: true})
	h := &counting{}
	inherit, strict := f.g.Idempotent(h), f.g.Route(&gateway.RouteOptions{AllowUnguarded: new(false)}).Idempotent(h)
	wantStatus(t, deliver(t, inherit, push("", nil, "x")), 200, "no key, the gateway's AllowUnguarded")
	wantStatus(t, deliver(t, strict, push("", nil, "x")), 500, "no key, AllowUnguarded turned off on the route")
	wantStatus(t, deliver(t, f.g.Route(nil).Idempotent(h), push("", nil, "x")), 200, "no key, Route(nil) keeps the gateway's AllowUnguarded")

	orders := &gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload}
	order := map[string]string{"order_id": "7"}
	wantStatus(t, deliver(t, f.g.Route(orders).Idempotent(h), push("1", order, "2 chairs")), 200, "first order")
	wantStatus(t, deliver(t, f.g.Route(orders).Idempotent(h), push("2", order, "9 tables")), 204, "conflict, the gateway's AcceptConflicts")
	orders.AcceptConflicts = new(false)
	wantStatus(t, deliver(t, f.g.Route(orders).Idempotent(h), push("3", order, "9 tables")), 409, "conflict, AcceptConflicts turned off on the route")

	off := newFixture(t, gateway.Options{})
	wantStatus(t, deliver(t, off.g.Route(nil).Idempotent(h), push("", nil, "x")), 500, "no key, Route(nil) keeps the gateway's AllowUnguarded off")
	wantStatus(t, deliver(t, off.g.Route(&gateway.RouteOptions{AllowUnguarded: new(true)}).Idempotent(h), push("", nil, "x")), 200, "no key, AllowUnguarded turned on on the route")
	if n := h.runs.Load(); n != 4 {
		t.Errorf("handler ran %d times, want 4", n)
	}
}

func TestIdempotentTooLarge(t *testing.T) {
	f := newFixture(t, gateway.Options{MaxBodyBytes: 1024})
	h := &counting{}
	wantStatus(t, deliver(t, f.g.Idempotent(h), push("1", nil, strings.Repeat("x", 2048))), 413, "oversized body")
	if h.runs.Load() != 0 {
		t.Fatal("handler ran on an oversized body")
	}
}

func TestIdempotentAllowUnguarded(t *testing.T) {
	f := newFixture(t, gateway.Options{AllowUnguarded: true})
	h := &counting{}
	wantStatus(t, deliver(t, f.g.Idempotent(h), push("", nil, "x")), 200, "unkeyed with AllowUnguarded")
	wantStatus(t, deliver(t, f.g.Idempotent(h), push("", nil, "x")), 200, "unkeyed with AllowUnguarded, again")
	if h.runs.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2 (unguarded)", h.runs.Load())
	}
}

func TestIdempotentInProgressIsQuiet503(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	inside, release := make(chan struct{}), make(chan struct{})
	srv := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inside)
		<-release
	}))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- deliver(t, srv, push("1", nil, "x")) }()
	<-inside
	rec := deliver(t, srv, push("1", nil, "x"))
	close(release)
	wantStatus(t, <-done, 200, "the holder")
	wantStatus(t, rec, 503, "concurrent copy")
	if rec.Header().Get("Retry-After") == "" {
		t.Error("503 must carry Retry-After")
	}
	warns := f.logs.lines(t, "WARN")
	if len(warns) != 1 {
		t.Fatalf("WARN lines = %v, want 1", warns)
	}
	d, _ := warns[0]["delivery"].(map[string]any)
	if warns[0]["key"] != "1" || d["subscription"] != "projects/p/subscriptions/s" || d["delivery_attempt"] != float64(3) || warns[0]["stack"] != nil {
		t.Fatalf("WARN line = %v, want key, subscription and delivery_attempt, no stack", warns[0])
	}
	if len(f.logs.lines(t, "ERROR")) != 0 {
		t.Fatal("contention must not log at ERROR")
	}
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 204, "the nacked copy comes back")
}

func TestIdempotentPanicReleases(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var panics atomic.Bool
	panics.Store(true)
	h := &counting{}
	srv := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panics.Load() {
			panic("boom")
		}
		h.ServeHTTP(w, r)
	}))
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 500, "panicking handler")
	if len(f.logs.lines(t, "ERROR")) != 1 {
		t.Fatal("a panic must be logged at ERROR")
	}
	panics.Store(false)
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 200, "retry after panic")

	abort := f.g.Idempotent(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler to propagate", r)
		}
	}()
	deliver(t, abort, push("2", nil, "x"))
}

// A handler that answered 2xx and then panicked did not finish its work:
// its delivery must not be acked. The status is held until the claim is
// settled, so the client sees 500, however the 2xx was written.
func TestIdempotentPanicAfter2xxIsNotAcked(t *testing.T) {
	for name, write := range map[string]func(w http.ResponseWriter){
		"WriteHeader": func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) },
		"Write":       func(w http.ResponseWriter) { io.WriteString(w, "ok") },
		"Flush": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNoContent)
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Error(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, gateway.Options{})
			srv := httptest.NewServer(f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				write(w)
				panic("boom after the answer")
			})))
			defer srv.Close()
			resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(push("1", nil, "x")))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
					t.Fatalf("a handler that panicked after a 2xx was acked (%d)", resp.StatusCode)
				}
			}
			// The claim was released: the redelivery runs.
			h := &counting{}
			wantStatus(t, deliver(t, f.g.Idempotent(h), push("1", nil, "x")), 200, "redelivery after the panic")
			if h.runs.Load() != 1 {
				t.Fatal("the redelivery did not run: the panicked claim was not released")
			}
		})
	}
}

// The 2xx is the ack, so it must reach the client only after the key is
// recorded done, even when the handler flushed it.
func TestIdempotentAcksAfterComplete(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var events []string
	w := &eventWriter{ResponseRecorder: httptest.NewRecorder(), events: &events}
	g, err := gateway.New(&completeHook{Store: f.st, hook: func() { events = append(events, "Complete") }}, &gateway.Options{NoRenew: true, Logger: f.logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
	})).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(push("1", nil, "x"))))
	if want := []string{"Complete", "WriteHeader 200"}; !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
}

// eventWriter notes when the status reaches the client.
type eventWriter struct {
	*httptest.ResponseRecorder
	events *[]string
}

func (w *eventWriter) WriteHeader(code int) {
	*w.events = append(*w.events, "WriteHeader "+strconv.Itoa(code))
	w.ResponseRecorder.WriteHeader(code)
}

// completeHook calls hook when a Complete returns.
type completeHook struct {
	store.Store
	hook func()
}

func (s *completeHook) Complete(ctx context.Context, c store.Claim) (bool, error) {
	defer s.hook()
	return s.Store.Complete(ctx, c)
}

func TestIdempotentStoreDown(t *testing.T) {
	st, _ := memstore.New(nil)
	fs := &faulty{Store: st}
	fs.failClaim.Store(true)
	g, _ := gateway.New(fs, &gateway.Options{Logger: (&logs{}).logger()})
	h := &counting{}
	wantStatus(t, deliver(t, g.Idempotent(h), push("1", nil, "x")), 503, "store down")
	if h.runs.Load() != 0 {
		t.Fatal("handler ran without a claim")
	}
}

func TestIdempotentRestoresBodyAndMessage(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	body := push("7", map[string]string{"order_id": "o-1"}, "payload")
	srv := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		if string(got) != body {
			t.Errorf("handler read %q, want the original body", got)
		}
		m, ok := pushenvelope.FromContext(r.Context())
		if !ok || m.ID != "7" || string(m.Data) != "payload" || m.Attributes["order_id"] != "o-1" {
			t.Errorf("FromContext = %+v, %v", m, ok)
		}
		if c, ok := gateway.ClaimFromContext(r.Context()); !ok || c.Key != "7" || c.Fence <= 0 {
			t.Errorf("ClaimFromContext = %+v, %v", c, ok)
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush through the recorder: %v", err)
		}
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the recorder must implement http.Flusher")
		}
	}))
	wantStatus(t, deliver(t, srv, body), 200, "delivery")
}

func TestScenarioBusinessKeyCatchesRepublish(t *testing.T) {
	f := newFixture(t, gateway.Options{Key: gateway.KeyFromAttribute("order_id")})
	h := &counting{}
	srv := f.g.Idempotent(h)
	wantStatus(t, deliver(t, srv, push("100", map[string]string{"order_id": "o-9"}, "x")), 200, "first publish")
	wantStatus(t, deliver(t, srv, push("101", map[string]string{"order_id": "o-9"}, "x")), 204, "republish with a new messageId")
	wantStatus(t, deliver(t, srv, push("102", nil, "x")), 500, "no order_id fails closed")
	if h.runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.runs.Load())
	}
}

func TestScenarioDoubleSubscription(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	h := &counting{}
	srv := f.g.Idempotent(h)
	a := push("5", nil, "x")
	b := strings.Replace(a, "subscriptions/s", "subscriptions/other", 1)
	wantStatus(t, deliver(t, srv, a), 200, "subscription A")
	wantStatus(t, deliver(t, srv, b), 204, "subscription B, same messageId")
	if h.runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.runs.Load())
	}
}

func TestScenarioMutexPerEntity(t *testing.T) {
	// Dedupe on the messageId, serialize on the po_id: every distinct update
	// runs, never two for one PO at once.
	f := newFixture(t, gateway.Options{})
	var inside, maxInside, applied atomic.Int32
	srv := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := pushenvelope.FromContext(r.Context())
		err := f.g.Mutex(r.Context(), "po:"+m.Attributes["po_id"], func(context.Context) error {
			if n := inside.Add(1); n > maxInside.Load() {
				maxInside.Store(n)
			}
			applied.Add(1)
			inside.Add(-1)
			return nil
		})
		if errors.Is(err, gateway.ErrInProgress) {
			http.Error(w, "po busy", http.StatusServiceUnavailable)
		}
	}))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			body := push(string(rune('a'+i)), map[string]string{"po_id": "42"}, "update")
			for deliver(t, srv, body).Code != 200 { // Pub/Sub redelivers nacks
			}
			if deliver(t, srv, body).Code != 204 {
				t.Error("a redelivered update must be a duplicate")
			}
		})
	}
	wg.Wait()
	if applied.Load() != 8 || maxInside.Load() != 1 {
		t.Fatalf("applied %d updates with at most %d at once; want 8 and 1", applied.Load(), maxInside.Load())
	}
}

func TestPushTyped(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var fail atomic.Bool
	fail.Store(true)
	var runs atomic.Int32
	srv := f.g.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		runs.Add(1)
		if !bytes.Equal(m.Data, []byte("x")) {
			t.Errorf("Data = %q", m.Data)
		}
		if fail.Load() {
			return errors.New("downstream failed")
		}
		return nil
	})
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 500, "fn error")
	fail.Store(false)
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 200, "fn ok on retry")
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 204, "duplicate")
	if runs.Load() != 2 {
		t.Fatalf("fn ran %d times, want 2", runs.Load())
	}
}

// A Push function whose own transaction found its claim taken over (a
// store's CompleteTx answered store.ErrFenced) wrote nothing. While the
// new holder is at work the delivery is in progress (503), not acked;
// once the work is done it is a duplicate.
func TestPushFencedOutTransactionWaitsForTheHolder(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var holder store.Claim
	srv := f.g.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		if holder.Status == store.Won {
			t.Error("the redelivery ran")
		}
		// Another delivery took the key over after the lease lapsed.
		f.clk.Advance(gateway.DefaultLease + time.Second)
		var err error
		if holder, err = f.st.Claim(context.Background(), "1", time.Minute, store.ClaimOptions{}); err != nil {
			return err
		}
		return fmt.Errorf("ledger insert: %w", store.ErrFenced)
	})
	// The new holder is at work: in progress, retried later (it may yet
	// fail, or be a copy of this message that crashes).
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 503, "fenced-out transaction, the new holder at work")
	if lines := f.logs.Records().Outcome(gateway.OutcomeInProgress); len(lines) != 1 || lines[0].Level.String() != "WARN" {
		t.Errorf("want one WARN in_progress line, got:\n%s", f.logs.Records())
	}
	if n := len(f.logs.Records().Level(slog.LevelError)); n != 0 {
		t.Errorf("%d ERROR lines, want none: nothing was written", n)
	}
	if ok, err := f.st.Complete(t.Context(), holder); !ok || err != nil {
		t.Fatalf("the holder's Complete = %v, %v", ok, err)
	}
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 204, "the redelivery once the holder is done")
}

// GET on a Push route is no delivery and there is no handler to pass it
// to: 405, and fn does not run.
func TestPushRefusesGet(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	srv := f.g.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		t.Error("fn ran for a GET")
		return nil
	})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	wantStatus(t, rec, http.StatusMethodNotAllowed, "GET on a Push route")
	if got := rec.Header().Get("Allow"); got != "POST" {
		t.Errorf("Allow = %q, want POST", got)
	}
}

// With a fingerprint on the route, an order_id reused for another payload
// answers 409 (a nack, so the message reaches the dead-letter topic), or
// 204 with AcceptConflicts; the handler never runs for it.
func TestIdempotentConflict(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	h := &counting{}
	byOrder := &gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload}
	srv := f.g.Route(byOrder).Idempotent(h)
	order := map[string]string{"order_id": "7"}
	wantStatus(t, deliver(t, srv, push("1", order, "2 chairs")), 200, "first order")
	wantStatus(t, deliver(t, srv, push("2", order, "2 chairs")), 204, "the same order republished")
	wantStatus(t, deliver(t, srv, push("3", order, "9 tables")), 409, "another order under the same order_id")
	byOrder.AcceptConflicts = new(true)
	wantStatus(t, deliver(t, f.g.Route(byOrder).Idempotent(h), push("4", order, "9 tables")), 204, "the same, AcceptConflicts")
	if n := h.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	if n := len(f.logs.Records().Outcome(gateway.OutcomeConflict).Level(slog.LevelError)); n != 2 {
		t.Errorf("%d ERROR conflict lines, want 2:\n%s", n, f.logs.Records())
	}
}

// post sends body to url as a push, and returns the final status with the
// interim (1xx) statuses the client saw before it.
func post(t testing.TB, c *http.Client, url, body string) (int, []int) {
	t.Helper()
	var (
		mu      sync.Mutex
		interim []int
	)
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			mu.Lock()
			defer mu.Unlock()
			interim = append(interim, code)
			return nil
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	return resp.StatusCode, interim
}

// Pub/Sub counts 102 among its success codes, so no interim answer may
// leave before the work is settled: a guarded route drops 1xx.
func TestIdempotentDropsInterimAnswers(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var runs atomic.Int32
	srv := httptest.NewServer(f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusProcessing)
		w.Header().Set("Link", "</receipt.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		if runs.Add(1) == 1 {
			http.Error(w, "downstream failed", http.StatusInternalServerError)
		}
	})))
	defer srv.Close()
	body := push("1", nil, "x")
	if code, interim := post(t, srv.Client(), srv.URL, body); code != 500 || len(interim) != 0 {
		t.Fatalf("a handler that wrote 102 and 103, then failed: interim %v, status %d; want no interim answer and 500", interim, code)
	}
	if code, interim := post(t, srv.Client(), srv.URL, body); code != 200 || len(interim) != 0 {
		t.Fatalf("the redelivery: interim %v, status %d; want it to run again, and 200 with no interim answer", interim, code)
	}
	if code, _ := post(t, srv.Client(), srv.URL, body); code != 204 {
		t.Fatalf("the next redelivery: status %d, want 204", code)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// While the answer is held, a failure written after progress (a line, an
// implicit 200, then http.Error) is the verdict: no ack, the claim is
// released, and the failure is logged. A later 2xx changes nothing.
func TestIdempotentFailureAfterProgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handle  func(w http.ResponseWriter)
		want    int
		failure string // what the failure's line says of it; "" for none
	}{
		{"Write then http.Error", func(w http.ResponseWriter) {
			io.WriteString(w, "charging the card\n")
			http.Error(w, "card declined", http.StatusPaymentRequired)
		}, http.StatusPaymentRequired, "handler answered 402 after 200"},
		{"WriteHeader 201 then 500", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusCreated)
			w.WriteHeader(http.StatusInternalServerError)
		}, http.StatusInternalServerError, "handler answered 500 after 201"},
		{"WriteHeader 200 then 500", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusOK)
			w.WriteHeader(http.StatusInternalServerError)
		}, http.StatusInternalServerError, "handler answered 500 after 200"},
		{"Flush then 502", func(w http.ResponseWriter) {
			w.(http.Flusher).Flush()
			w.WriteHeader(http.StatusBadGateway)
		}, http.StatusBadGateway, "handler answered 502 after 200"},
		{"Write then WriteHeader 200", func(w http.ResponseWriter) {
			io.WriteString(w, "done\n")
			w.WriteHeader(http.StatusOK)
		}, http.StatusOK, ""},
		{"WriteHeader 202 then 204", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusAccepted)
			w.WriteHeader(http.StatusNoContent)
		}, http.StatusAccepted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, gateway.Options{})
			var runs atomic.Int32
			srv := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					tc.handle(w)
				}
			}))
			wantStatus(t, deliver(t, srv, push("1", nil, "x")), tc.want, tc.name)
			failed := f.logs.Records().Outcome(gateway.OutcomeFailed).Level(slog.LevelError).Containing("handler failed")
			if tc.failure == "" {
				if len(failed) != 0 || len(f.logs.Records().Level(slog.LevelError)) != 0 {
					t.Fatalf("a 2xx after a 2xx is an ack, yet ERROR lines:\n%s", f.logs.Records())
				}
				wantStatus(t, deliver(t, srv, push("1", nil, "x")), 204, "the redelivery of an acked message")
				return
			}
			if len(failed) != 1 || failed[0].Attrs["error"] != tc.failure {
				t.Fatalf("want one ERROR \"handler failed\" line with error %q, got:\n%s", tc.failure, f.logs.Records())
			}
			wantStatus(t, deliver(t, srv, push("1", nil, "x")), 200, "the redelivery runs again (the claim was released)")
			if n := runs.Load(); n != 2 {
				t.Fatalf("handler ran %d times, want 2", n)
			}
		})
	}
}

// A GET, HEAD or OPTIONS carrying a body is not a health check: it must
// not reach the wrapped handler unguarded. It gets 405, logged at WARN.
func TestIdempotentRefusesBodiedNonPushMethods(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	h := &counting{}
	srv := httptest.NewServer(f.g.Idempotent(h))
	defer srv.Close()
	body := push("1", nil, "x")
	send := func(name string, req *http.Request) {
		t.Helper()
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s: status %d, Allow %q; want 405, Allow POST", name, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	sent := 0
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		req, _ := http.NewRequest(method, srv.URL, strings.NewReader(body)) // Content-Length
		send(method+" with a push envelope", req)
		req, _ = http.NewRequest(method, srv.URL, io.NopCloser(strings.NewReader(body))) // chunked
		send(method+" with a chunked push envelope", req)
		sent += 2
	}
	// A body the request does not announce (a request built in process).
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Body = io.NopCloser(strings.NewReader(body))
	rec := httptest.NewRecorder()
	f.g.Idempotent(h).ServeHTTP(rec, req)
	wantStatus(t, rec, http.StatusMethodNotAllowed, "GET with an unannounced body")
	sent++
	if n := h.runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for requests with a body", n)
	}
	if n := len(f.logs.Records().Outcome(gateway.OutcomeRejected).Level(slog.LevelWarn)); n != sent {
		t.Errorf("%d WARN rejected lines, want %d:\n%s", n, sent, f.logs.Records())
	}
	// Health checks still pass.
	resp, err := srv.Client().Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || h.runs.Load() != 1 {
		t.Fatalf("plain GET: status %d, runs %d; want the handler's 200", resp.StatusCode, h.runs.Load())
	}
}

// A guarded handler cannot hijack the connection: it would answer Pub/Sub
// behind the hold. Hijack answers an error on every path to it.
func TestIdempotentRefusesHijack(t *testing.T) {
	for name, hijack := range map[string]func(http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error){
		"ResponseController": func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
			return http.NewResponseController(w).Hijack()
		},
		"Hijacker": func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
			hj, ok := w.(http.Hijacker)
			if !ok {
				return nil, nil, errors.New("not an http.Hijacker")
			}
			return hj.Hijack()
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, gateway.Options{})
			var runs atomic.Int32
			errs := make(chan error, 2)
			srv := httptest.NewServer(f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) > 1 {
					return
				}
				conn, buf, err := hijack(w)
				errs <- err
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				// What a hijacker could do: ack behind the gateway's back.
				buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
				buf.Flush()
				conn.Close()
			})))
			defer srv.Close()
			body := push("1", nil, "x")
			code, _ := post(t, srv.Client(), srv.URL, body)
			err := <-errs
			if code != 500 {
				t.Fatalf("status %d (Hijack answered %v), want the handler's 500", code, err)
			}
			if err == nil || !strings.Contains(err.Error(), "cannot hijack") {
				t.Fatalf("Hijack answered %v, want the gateway's refusal", err)
			}
			if code, _ := post(t, srv.Client(), srv.URL, body); code != 200 || runs.Load() != 2 {
				t.Fatalf("redelivery: status %d after %d runs; want it to run again", code, runs.Load())
			}
		})
	}
}

// Over HTTP/2 a request announces no length: a GET whose stream stays open
// for an empty body is still a health check, one that sends bytes is not.
func TestIdempotentBodiedNonPushMethodsHTTP2(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	h := &counting{}
	srv := httptest.NewUnstartedServer(f.g.Idempotent(h))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	for _, tc := range []struct {
		name string
		body io.Reader
		want int
		runs int32
	}{
		{"no body", nil, 200, 1},
		{"an empty body of unknown length", io.NopCloser(strings.NewReader("")), 200, 2},
		{"a push envelope of unknown length", io.NopCloser(strings.NewReader(push("1", nil, "x"))), 405, 2},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, tc.body)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != tc.want || h.runs.Load() != tc.runs {
			t.Errorf("GET with %s over %s: status %d, handler runs %d; want %d and %d", tc.name, resp.Proto, resp.StatusCode, h.runs.Load(), tc.want, tc.runs)
		}
	}
}

// A status no HTTP answer can carry panics in the handler, as on net/http's
// own writer, where the guard recovers it: 500, and the claim is released.
func TestIdempotentInvalidStatusPanicsInHandler(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var runs atomic.Int32
	srv := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			w.WriteHeader(http.StatusOK)
			w.WriteHeader(1000)
		}
	}))
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 500, "WriteHeader(1000)")
	if n := len(f.logs.Records().Containing("handler panicked")); n != 1 {
		t.Fatalf("%d \"handler panicked\" lines, want 1:\n%s", n, f.logs.Records())
	}
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 200, "the redelivery runs again")
}

// The recorder takes what net/http's writer takes: every code from 100 to
// 999. A 1xx is an interim answer, dropped; a code up to 999 is an answer
// like any other (here a failure, not a 2xx), not the panic of an invalid
// code.
func TestIdempotentStatusBounds(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	srv := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusContinue)
		w.WriteHeader(999)
	}))
	wantStatus(t, deliver(t, srv, push("1", nil, "x")), 999, "WriteHeader(100), then WriteHeader(999)")
	if failed := f.logs.Records().Outcome(gateway.OutcomeFailed); len(failed) != 1 || failed[0].Attrs["error"] != "handler answered 999" {
		t.Fatalf("want one failed line for the 999 alone, got:\n%s", f.logs.Records())
	}
}

// heldUntil is a store whose every key is held by a live claim that ends
// lease from the moment of the Claim.
type heldUntil struct {
	*memstore.Store
	lease time.Duration
}

func (s *heldUntil) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	return store.Claim{Key: key, Status: store.HeldByOther, Fence: 1, LeaseUntil: time.Now().Add(s.lease)}, nil
}

// A 503 for a key held elsewhere tells when to come back: Retry-After is
// the seconds until the holder's lease ends, the part second counted as a
// whole one; once that lease has ended (the store's clock behind ours)
// there is nothing to wait for, and no Retry-After.
func TestIdempotentRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		lease time.Duration
		want  string
	}{{10*time.Second + 500*time.Millisecond, "11"}, {-1500 * time.Millisecond, ""}} {
		mem, _ := memstore.New(nil)
		g, err := gateway.New(&heldUntil{Store: mem, lease: tc.lease}, &gateway.Options{NoRenew: true, Logger: (&logs{}).logger()})
		if err != nil {
			t.Fatal(err)
		}
		rec := deliver(t, g.Idempotent(&counting{}), push("1", nil, "x"))
		wantStatus(t, rec, 503, "a key held elsewhere")
		if got := rec.Header().Get("Retry-After"); got != tc.want {
			t.Errorf("holder's lease ending in %v: Retry-After %q, want %q", tc.lease, got, tc.want)
		}
	}
}

// Idempotent takes a GET, HEAD or OPTIONS for a health check only when it
// carries no body: one that announces a body (a Content-Length, or
// chunked) gets 405 even if what arrives is empty, and a request built
// without any Body (nil, as a handler's unit test may build it) passes.
func TestIdempotentAnnouncedBodies(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	h := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for _, tc := range []struct {
		name string
		set  func(r *http.Request)
		want int
	}{
		{"Content-Length, nothing sent", func(r *http.Request) { r.ContentLength = 5 }, http.StatusMethodNotAllowed},
		{"chunked, nothing sent", func(r *http.Request) { r.ContentLength, r.TransferEncoding = -1, []string{"chunked"} }, http.StatusMethodNotAllowed},
		{"no Body at all", func(r *http.Request) { r.Body = nil }, http.StatusTeapot},
	} {
		r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		tc.set(r)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		wantStatus(t, rec, tc.want, "GET, "+tc.name)
	}
}

// A held answer short enough to be kept whole goes out as the handler
// wrote it, its Content-Length included; and every 2xx, 299 too, is the
// handler's success, an ack with the key done.
func TestIdempotentSendsAWholeAnswerAsWritten(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var runs atomic.Int32
	h := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(299)
		io.WriteString(w, "done\n")
	}))
	rec := deliver(t, h, push("1", nil, "x"))
	wantStatus(t, rec, 299, "a handler answering 299")
	if cl, body := rec.Header().Get("Content-Length"), rec.Body.String(); cl != "5" || body != "done\n" {
		t.Errorf("answer Content-Length %q, body %q; want the handler's own: 5, %q", cl, body, "done\n")
	}
	wantStatus(t, deliver(t, h, push("1", nil, "x")), 204, "the redelivery of a message answered 299")
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want once", n)
	}
}

// On the HTTP surface, under AcceptConflicts a conflict with a record that
// is only held is not acked: the holder may yet fail and release the key,
// and then this payload is the one to run.
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

// A handler that returns on ctx.Done after a lost lease, without writing,
// is answered 500, not 200.
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

// A caller whose context ended before the key was claimed is not a store
// failure: outcome cancelled, one WARN line, no ERROR, and still a nack
// (503).
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
