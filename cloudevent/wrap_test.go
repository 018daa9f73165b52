package cloudevent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// These tests call the wrapped function directly, to check what it returns
// and logs; delivery_test.go checks what functions-framework makes of it.

// pubsubEvent builds a messagePublished event as the SDK hands it over.
func pubsubEvent(t testing.TB, id string, attrs map[string]string) event.Event {
	t.Helper()
	e := event.New()
	e.SetID(id)
	e.SetType(pushenvelope.MessagePublishedType)
	e.SetSource(testSource)
	if err := e.SetData(event.ApplicationJSON, message{id: id, data: "x", attrs: attrs}.published(testSubscription)); err != nil {
		t.Fatal(err)
	}
	return e
}

// outcomes returns the level and outcome of each record, for comparison.
func outcomes(recs logtest.Records) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Level.String()+" "+r.Outcome())
	}
	return out
}

func TestWrapOutcomes(t *testing.T) {
	ctx := t.Context()
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, st)
	logs := &logtest.Sink{}
	failure := errors.New("supplier down")
	b := newBody(func(ctx context.Context, e event.Event, run int) error {
		switch e.ID() {
		case "fails":
			return failure
		case "fenced":
			// fn's transaction was fenced out (CompleteTx) on a record
			// DONE already: an earlier commit of it landed.
			c, _ := gateway.ClaimFromContext(ctx)
			if _, err := st.Complete(ctx, c); err != nil {
				return err
			}
			return fmt.Errorf("ledger: %w", store.ErrFenced)
		case "nested":
			// A Mutex inside fn met a holder: fn's error, not Wrap's outcome.
			return fmt.Errorf("po update: %w", &gateway.InProgressError{Key: "po:1"})
		}
		return nil
	})
	fn := cloudevent.Wrap(g, b.run, &cloudevent.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}, Logger: logs.Logger()})

	// A live holder: another delivery claimed order o-2 and is still running.
	if _, err := st.Claim(ctx, "order_id:o-2", time.Minute, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	malformed := event.New()
	malformed.SetID("bad")
	malformed.SetType(pushenvelope.MessagePublishedType)
	malformed.SetSource(testSource)
	if err := malformed.SetData(event.ApplicationJSON, map[string]any{"subscription": "s"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		event    event.Event
		wantIs   error // nil: Wrap returns nil
		wantCode int   // the *cehttp.Result's code; 0: no result
		wantLog  string
	}{
		{"fresh", pubsubEvent(t, "m-1", map[string]string{"order_id": "o-1"}), nil, 0, "DEBUG won"},
		{"duplicate", pubsubEvent(t, "m-9", map[string]string{"order_id": "o-1"}), nil, 0, "INFO duplicate"},
		{"in progress", pubsubEvent(t, "m-2", map[string]string{"order_id": "o-2"}), gateway.ErrInProgress, http.StatusServiceUnavailable, "WARN in_progress"},
		{"no key", pubsubEvent(t, "m-3", nil), gateway.ErrNoKey, http.StatusInternalServerError, "ERROR no_key"},
		{"not a message", malformed, pushenvelope.ErrNotPush, http.StatusBadRequest, "WARN rejected"},
		{"fenced out in its transaction", pubsubEvent(t, "fenced", map[string]string{"order_id": "o-6"}), nil, 0, "WARN fenced_out"},
		{"function error", pubsubEvent(t, "fails", map[string]string{"order_id": "o-4"}), failure, 0, "ERROR failed"},
		{"function error matching a gateway sentinel", pubsubEvent(t, "nested", map[string]string{"order_id": "o-5"}), gateway.ErrInProgress, 0, "WARN failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fn(ctx, tt.event)
			if tt.wantIs == nil && err != nil {
				t.Fatalf("Wrap returned %v, want nil (ack)", err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Fatalf("Wrap returned %v, want an error matching %v", err, tt.wantIs)
			}
			var res *cehttp.Result
			switch {
			case tt.wantCode == 0 && errors.As(err, &res):
				t.Errorf("Wrap returned a %d result, want fn's own error", res.StatusCode)
			case tt.wantCode != 0 && !errors.As(err, &res):
				t.Errorf("Wrap returned %v, want a *cehttp.Result with code %d", err, tt.wantCode)
			case tt.wantCode != 0 && res.StatusCode != tt.wantCode:
				t.Errorf("result code = %d, want %d", res.StatusCode, tt.wantCode)
			}
			if err != nil && strings.Contains(err.Error(), "o-2") {
				t.Errorf("error text %q names the key; functions-framework prints it to stderr", err)
			}
			if diff := cmp.Diff([]string{tt.wantLog}, outcomes(logs.Take())); diff != "" {
				t.Errorf("log lines (-want +got):\n%s", diff)
			}
		})
	}
	if n := b.count("m-9"); n != 0 {
		t.Errorf("the duplicate ran %d times", n)
	}
	// The record names the event that did the work.
	if r, ok, err := st.Inspect(ctx, "order_id:o-1"); err != nil || !ok || r.Origin != "cloudevent/m-1" {
		t.Errorf("Inspect = %+v, %v, %v; want the origin cloudevent/m-1", r, ok, err)
	}
}

func TestWrapInProgressCarriesTheHolder(t *testing.T) {
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.Claim(t.Context(), "m-1", time.Minute, store.ClaimOptions{Origin: "pull/m-0"})
	if err != nil {
		t.Fatal(err)
	}
	fn := cloudevent.Wrap(newGateway(t, st), newBody(nil).run, &cloudevent.Options{Logger: quiet()})
	err = fn(t.Context(), pubsubEvent(t, "m-1", nil))
	var ip *gateway.InProgressError
	if !errors.As(err, &ip) || !ip.LeaseUntil.Equal(held.LeaseUntil) || ip.HeldBy != "pull/m-0" {
		t.Fatalf("Wrap returned %v, want an *InProgressError with the holder's lease end %v and origin pull/m-0", err, held.LeaseUntil)
	}
}

func TestWrapPanicReleasesAndPropagates(t *testing.T) {
	logs := &logtest.Sink{}
	b := newBody(func(ctx context.Context, e event.Event, run int) error {
		if run == 1 {
			panic("bug")
		}
		return nil
	})
	fn := cloudevent.Wrap(newGateway(t, nil), b.run, &cloudevent.Options{Logger: logs.Logger()})
	func() {
		defer func() {
			if p := recover(); p != "bug" {
				t.Fatalf("recovered %v, want the function's panic to go on", p)
			}
		}()
		fn(t.Context(), pubsubEvent(t, "m-1", nil))
	}()
	if diff := cmp.Diff([]string{"ERROR failed"}, outcomes(logs.Take())); diff != "" {
		t.Errorf("log lines after a panic (-want +got):\n%s", diff)
	}
	if err := fn(t.Context(), pubsubEvent(t, "m-1", nil)); err != nil {
		t.Fatalf("the retry after a panic: %v, want nil", err)
	}
	if n := b.count("m-1"); n != 2 {
		t.Fatalf("the function ran %d times, want 2 (the claim was released)", n)
	}
}

func TestWrapDisabledGatewayRunsUnkeyedEvents(t *testing.T) {
	// Like the HTTP middleware: a disabled gateway runs everything, even an
	// event without a key.
	g, err := gateway.New(must(memstore.New(nil)), &gateway.Options{Disabled: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	b := newBody(nil)
	fn := cloudevent.Wrap(g, b.run, &cloudevent.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}, Logger: quiet()})
	if err := fn(t.Context(), pubsubEvent(t, "m-1", nil)); err != nil {
		t.Fatalf("disabled gateway, no key: %v, want nil", err)
	}
	if n := b.count("m-1"); n != 1 {
		t.Fatalf("the function ran %d times, want once", n)
	}
}

func TestWrapCopiesOptions(t *testing.T) {
	opts := &cloudevent.Options{} // Key and Logger left for Wrap's defaults
	b := newBody(nil)
	fn := cloudevent.Wrap(newGateway(t, nil), b.run, opts)
	if opts.Route.Key != nil || opts.Logger != nil {
		t.Errorf("Wrap filled its defaults into the caller's Options (Key set: %v, Logger set: %v); they belong in its own copy",
			opts.Route.Key != nil, opts.Logger != nil)
	}
	opts.Route.Key = gateway.KeyFromAttribute("order_id") // too late to matter
	if err := fn(t.Context(), pubsubEvent(t, "m-1", nil)); err != nil {
		t.Fatalf("Wrap used the caller's later change to Options: %v", err)
	}
}

func TestWrapRejectsNil(t *testing.T) {
	g := newGateway(t, nil)
	for name, wrap := range map[string]func(){
		"nil gateway":  func() { cloudevent.Wrap(nil, newBody(nil).run, nil) },
		"nil function": func() { cloudevent.Wrap(g, nil, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p := recover(); p == nil || !strings.HasPrefix(p.(string), "cloudevent: ") {
					t.Errorf("recovered %v, want a cloudevent: panic at Wrap", p)
				}
			}()
			wrap()
		})
	}
}

func TestWrapLogsIdentifyTheEvent(t *testing.T) {
	logs := &logtest.Sink{}
	fn := cloudevent.Wrap(newGateway(t, nil), newBody(nil).run, &cloudevent.Options{Logger: logs.Logger()})
	if err := fn(t.Context(), pubsubEvent(t, "m-1", nil)); err != nil {
		t.Fatal(err)
	}
	recs := logs.Records()
	if len(recs) != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", len(recs), recs)
	}
	line, err := recs[0].JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"message_id":   "m-1",
		"form":         "cloudevent",
		"type":         pushenvelope.MessagePublishedType,
		"source":       testSource,
		"subscription": testSubscription,
	}
	d, _ := line["delivery"].(map[string]any)
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("delivery attributes (-want +got):\n%s", diff)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestWrapHideKeys checks that with the gateway's HideKeys, neither the error
// Wrap hands to functions-framework for a held key nor the answer the
// framework sends holds the raw key; the digest the logs use stands in.
func TestWrapHideKeys(t *testing.T) {
	const key = "customer-4711@example.com" // the event id, so the key
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.Claim(t.Context(), key, time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Sink{}
	g, err := gateway.New(st, &gateway.Options{HideKeys: true, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	wrapped := cloudevent.Wrap(g, newBody(nil).run, nil)
	handed := make(chan error, 1) // what the framework got
	base := serveFunction(t, func(ctx context.Context, e event.Event) error {
		err := wrapped(ctx, e)
		handed <- err
		return err
	})

	code, answer := deliver(t, binaryRequest(base, message{id: key, data: "x"}))
	got := <-handed
	if code != http.StatusServiceUnavailable {
		t.Fatalf("status %d (%q), want 503 for a held key", code, answer)
	}
	if strings.Contains(answer, key) {
		t.Errorf("the framework answered %q, which holds the raw key", answer)
	}
	var texts []string
	for e := range errorTree(got) {
		texts = append(texts, e.Error(), fmt.Sprintf("%+v", e))
	}
	for _, text := range texts {
		if strings.Contains(text, key) {
			t.Errorf("the error handed to the framework holds the raw key: %q", text)
		}
	}
	sum := sha256.Sum256([]byte(key))
	digest := "sha256:" + hex.EncodeToString(sum[:8]) // as docs/operations.md gives it
	var ip *gateway.InProgressError
	if !errors.As(got, &ip) || ip.Key != digest || !ip.LeaseUntil.Equal(held.LeaseUntil) {
		t.Fatalf("errors.As(*InProgressError) on %v: got %+v, want Key %q (the digest) and the holder's lease end", got, ip, digest)
	}
	lines := logs.Records().Outcome(gateway.OutcomeInProgress)
	if len(lines.With("key_digest", digest)) != 1 || len(logs.Records().Where(func(r logtest.Record) bool { _, ok := r.Attrs["key"]; return ok })) != 0 {
		t.Errorf("the log must name the key by the same digest %q, and never by a \"key\" attribute:\n%s", digest, logs.Records())
	}
}

// errorTree yields err and every error reachable from it through Unwrap.
func errorTree(err error) func(yield func(error) bool) {
	return func(yield func(error) bool) {
		var walk func(error) bool
		walk = func(e error) bool {
			if e == nil {
				return true
			}
			if !yield(e) {
				return false
			}
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				return walk(u.Unwrap())
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					if !walk(inner) {
						return false
					}
				}
			}
			return true
		}
		walk(err)
	}
}

// With a Fingerprint on the route, an order_id reused for another payload is a
// conflict: a 409 result (a nack), or nil (an ack) with AcceptConflicts;
// the function does not run for it.
func TestWrapConflict(t *testing.T) {
	g := newGateway(t, nil)
	logs := &logtest.Sink{}
	b := newBody(nil)
	opts := &cloudevent.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload}, Logger: logs.Logger()}
	fn := cloudevent.Wrap(g, b.run, opts)
	order := func(id, data string) event.Event {
		e := pubsubEvent(t, id, nil)
		if err := e.SetData(event.ApplicationJSON, message{id: id, data: data, attrs: map[string]string{"order_id": "7"}}.published(testSubscription)); err != nil {
			t.Fatal(err)
		}
		return e
	}
	if err := fn(t.Context(), order("m-1", "2 chairs")); err != nil {
		t.Fatalf("first order: %v", err)
	}
	if err := fn(t.Context(), order("m-2", "2 chairs")); err != nil {
		t.Fatalf("the same order republished: %v, want nil (a duplicate)", err)
	}
	err := fn(t.Context(), order("m-3", "9 tables"))
	var res *cehttp.Result
	if !errors.Is(err, gateway.ErrConflict) || !errors.As(err, &res) || res.StatusCode != http.StatusConflict {
		t.Fatalf("another order under the same order_id: %v, want a 409 result matching gateway.ErrConflict", err)
	}
	opts.Route.AcceptConflicts = new(true)
	if err := cloudevent.Wrap(g, b.run, opts)(t.Context(), order("m-4", "9 tables")); err != nil {
		t.Fatalf("the same with AcceptConflicts: %v, want nil (an ack)", err)
	}
	if n := b.count("m-3") + b.count("m-4"); n != 0 {
		t.Errorf("the function ran %d times for conflicting orders", n)
	}
	if diff := cmp.Diff([]string{"DEBUG won", "INFO duplicate", "ERROR conflict", "ERROR conflict"}, outcomes(logs.Take())); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}

// Options.Route is merged over the Gateway's settings by Route's rule: a
// zero field takes the Gateway's, a set one replaces it; the key alone
// defaults to KeyFromEvent whatever the Gateway's Options.Key.
func TestWrapTakesTheRouteSettings(t *testing.T) {
	byOrder := gateway.KeyFromAttribute("order_id")
	for _, tc := range []struct {
		name    string
		gateway gateway.Options
		route   gateway.RouteOptions
		want    int // the status of an event without an order_id; 0: fn's nil
	}{
		{"the Gateway's AllowUnguarded", gateway.Options{AllowUnguarded: true}, gateway.RouteOptions{Key: byOrder}, 0},
		{"the route turns it off", gateway.Options{AllowUnguarded: true}, gateway.RouteOptions{Key: byOrder, AllowUnguarded: new(false)}, http.StatusInternalServerError},
		{"the route turns it on", gateway.Options{}, gateway.RouteOptions{Key: byOrder, AllowUnguarded: new(true)}, 0},
		{"KeyFromEvent, not the Gateway's Key", gateway.Options{Key: byOrder}, gateway.RouteOptions{}, 0},
		{"the route's Key", gateway.Options{}, gateway.RouteOptions{Key: byOrder}, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.gateway
			opts.Logger = quiet()
			g, err := gateway.New(must(memstore.New(nil)), &opts)
			if err != nil {
				t.Fatal(err)
			}
			b := newBody(nil)
			err = cloudevent.Wrap(g, b.run, &cloudevent.Options{Route: tc.route, Logger: quiet()})(t.Context(), pubsubEvent(t, "m-1", nil))
			var res *cehttp.Result
			switch {
			case tc.want == 0 && err != nil:
				t.Errorf("Wrap = %v, want nil (fn ran)", err)
			case tc.want != 0 && (!errors.As(err, &res) || res.StatusCode != tc.want):
				t.Errorf("Wrap = %v, want a %d result", err, tc.want)
			}
			if n, want := b.count("m-1"), map[bool]int{true: 1}[tc.want == 0]; n != want {
				t.Errorf("fn ran %d times, want %d", n, want)
			}
		})
	}
}
