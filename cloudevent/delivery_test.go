package cloudevent_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// These tests send deliveries through functions-framework (framework_test.go)
// and check the status Pub/Sub would see: 2xx acknowledges, anything else is
// a nack.

// body is the function under test. It counts its runs per event id and
// records what each run saw; do scripts each run (nil: succeed).
type body struct {
	do func(ctx context.Context, e event.Event, run int) error

	mu   sync.Mutex // guards runs and seen
	runs map[string]int
	seen []sight
}

// sight is what one run of a body saw in its context.
type sight struct {
	Message  *pushenvelope.Message // nil when the context had none
	ClaimKey string
}

func newBody(do func(ctx context.Context, e event.Event, run int) error) *body {
	return &body{do: do, runs: map[string]int{}}
}

func (b *body) run(ctx context.Context, e event.Event) error {
	m, _ := pushenvelope.FromContext(ctx)
	c, _ := gateway.ClaimFromContext(ctx)
	b.mu.Lock()
	b.runs[e.ID()]++
	n := b.runs[e.ID()]
	b.seen = append(b.seen, sight{Message: m, ClaimKey: c.Key})
	b.mu.Unlock()
	if b.do == nil {
		return nil
	}
	return b.do(ctx, e, n)
}

// count is how many times the body ran for event id.
func (b *body) count(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[id]
}

func (b *body) last(t *testing.T) sight {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) == 0 {
		t.Fatal("the function never ran")
	}
	return b.seen[len(b.seen)-1]
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newGateway(t *testing.T, st store.Store) *gateway.Gateway {
	t.Helper()
	if st == nil {
		var err error
		if st, err = memstore.New(nil); err != nil {
			t.Fatal(err)
		}
	}
	g, err := gateway.New(st, &gateway.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// serve wraps b over a fresh in-memory store and serves it through the
// framework; opts may be nil.
func serve(t *testing.T, b *body, opts *cloudevent.Options) string {
	t.Helper()
	o := cloudevent.Options{Logger: quiet()}
	if opts != nil {
		o = *opts
		o.Logger = quiet()
	}
	return serveFunction(t, cloudevent.Wrap(newGateway(t, nil), b.run, &o))
}

func eachForm(t *testing.T, test func(t *testing.T, f form)) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) { test(t, f) })
	}
}

func TestEveryFormReachesTheFunction(t *testing.T) {
	eachForm(t, func(t *testing.T, f form) {
		b := newBody(nil)
		base := serve(t, b, nil)
		msg := message{id: "m-1", data: `{"order":1}`, attrs: map[string]string{"order_id": "o-1"}}
		expect(t, f.request(base, msg), http.StatusOK, "a fresh delivery")

		got := b.last(t)
		if got.Message == nil {
			t.Fatal("the function's context has no pushenvelope.Message")
		}
		want := pushenvelope.Message{
			ID:           "m-1",
			Data:         []byte(`{"order":1}`),
			Attributes:   map[string]string{"order_id": "o-1"},
			PublishTime:  time.Date(2026, 3, 1, 10, 15, 0, 250e6, time.UTC),
			Subscription: f.subscription,
			Source:       testSource,
			Form:         pushenvelope.CloudEventBinary, // the SDK does not say which mode carried the event
		}
		if diff := cmp.Diff(want, *got.Message); diff != "" {
			t.Errorf("message in the context (-want +got):\n%s", diff)
		}
		if got.ClaimKey != "m-1" {
			t.Errorf("claim key = %q, want the event id %q", got.ClaimKey, "m-1")
		}
	})
}

func TestRedeliveryAcksWithoutRunning(t *testing.T) {
	eachForm(t, func(t *testing.T, f form) {
		b := newBody(nil)
		base := serve(t, b, nil)
		msg := message{id: "m-1", data: "x"}
		expect(t, f.request(base, msg), http.StatusOK, "first delivery")
		expect(t, f.request(base, msg), http.StatusOK, "redelivery of a done message must be acked")
		if n := b.count("m-1"); n != 1 {
			t.Fatalf("the function ran %d times, want once", n)
		}
	})
}

func TestConcurrentCopyIsRetriedLater(t *testing.T) {
	eachForm(t, func(t *testing.T, f form) {
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unblock) // runs before the slot is given back
		b := newBody(func(ctx context.Context, e event.Event, run int) error {
			if run == 1 {
				close(started)
				<-release
			}
			return nil
		})
		base := serve(t, b, nil)
		msg := message{id: "m-1", data: "x"}

		first := make(chan int, 1)
		go func() {
			code, _, _ := send(context.Background(), f.request(base, msg))
			first <- code
		}()
		<-started
		code, text := deliver(t, f.request(base, msg))
		if code != http.StatusServiceUnavailable || !strings.Contains(text, "in progress") {
			t.Fatalf("a copy while the first delivery runs: %d %q, want 503 (nack, retried later)", code, text)
		}
		unblock()
		if code := <-first; code != http.StatusOK {
			t.Fatalf("the first delivery answered %d, want 200", code)
		}
		expect(t, f.request(base, msg), http.StatusOK, "the copy's retry after success is a duplicate")
		if n := b.count("m-1"); n != 1 {
			t.Fatalf("the function ran %d times, want once", n)
		}
	})
}

func TestFailureIsRetried(t *testing.T) {
	eachForm(t, func(t *testing.T, f form) {
		b := newBody(func(ctx context.Context, e event.Event, run int) error {
			if run == 1 {
				return errors.New("supplier down")
			}
			return nil
		})
		base := serve(t, b, nil)
		msg := message{id: "m-1", data: "x"}
		expect(t, f.request(base, msg), http.StatusInternalServerError, "a failed run must nack")
		expect(t, f.request(base, msg), http.StatusOK, "the retry of a failed run must run")
		expect(t, f.request(base, msg), http.StatusOK, "a redelivery after success is a duplicate")
		if n := b.count("m-1"); n != 2 {
			t.Fatalf("the function ran %d times, want 2 (failed, then done once)", n)
		}
	})
}

func TestPanicReleasesTheClaim(t *testing.T) {
	eachForm(t, func(t *testing.T, f form) {
		b := newBody(func(ctx context.Context, e event.Event, run int) error {
			if run == 1 {
				panic("bug in the function")
			}
			return nil
		})
		base := serve(t, b, nil)
		msg := message{id: "m-1", data: "x"}
		// functions-framework prints the stack; the SDK recovers and answers 500.
		expect(t, f.request(base, msg), http.StatusInternalServerError, "a panic must nack")
		expect(t, f.request(base, msg), http.StatusOK, "the retry after a panic must run (claim released)")
		if n := b.count("m-1"); n != 2 {
			t.Fatalf("the function ran %d times, want 2", n)
		}
	})
}

// brokenStore fails every call, like a store that cannot be reached.
type brokenStore struct{}

var errUnreachable = errors.New("dial tcp 10.0.0.3:6379: connect: connection refused")

func (brokenStore) Claim(context.Context, string, time.Duration, store.ClaimOptions) (store.Claim, error) {
	return store.Claim{}, errUnreachable
}
func (brokenStore) Complete(context.Context, store.Claim) (bool, error) { return false, errUnreachable }
func (brokenStore) Release(context.Context, store.Claim) error          { return errUnreachable }

func TestStoreFailureIsRetried(t *testing.T) {
	eachForm(t, func(t *testing.T, f form) {
		b := newBody(nil)
		base := serveFunction(t, cloudevent.Wrap(newGateway(t, brokenStore{}), b.run, &cloudevent.Options{Logger: quiet()}))
		expect(t, f.request(base, message{id: "m-1", data: "x"}), http.StatusServiceUnavailable, "a store failure must nack")
		if n := b.count("m-1"); n != 0 {
			t.Fatalf("the function ran %d times without a claim", n)
		}
	})
}

func TestAttributeKeyCatchesRepublish(t *testing.T) {
	eachForm(t, func(t *testing.T, f form) {
		b := newBody(nil)
		base := serve(t, b, &cloudevent.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}})
		attrs := map[string]string{"order_id": "o-7"}
		expect(t, f.request(base, message{id: "m-1", data: "x", attrs: attrs}), http.StatusOK, "first publish")
		expect(t, f.request(base, message{id: "m-2", data: "x", attrs: attrs}), http.StatusOK, "a republish is a duplicate")
		if got := b.count("m-1") + b.count("m-2"); got != 1 {
			t.Fatalf("the function ran %d times for one order, want once", got)
		}
		if key := b.last(t).ClaimKey; key != "order_id:o-7" {
			t.Errorf("claim key = %q, want %q", key, "order_id:o-7")
		}
	})
}

func TestNoKeyFailsClosed(t *testing.T) {
	keyed := func(allow bool) *cloudevent.Options {
		return &cloudevent.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), AllowUnguarded: new(allow)}}
	}
	eachForm(t, func(t *testing.T, f form) {
		b := newBody(nil)
		base := serve(t, b, keyed(false))
		expect(t, f.request(base, message{id: "m-1", data: "x"}), http.StatusInternalServerError, "no order_id attribute")
		if n := b.count("m-1"); n != 0 {
			t.Fatalf("the function ran %d times without a key", n)
		}

		b = newBody(nil)
		base = serve(t, b, keyed(true))
		expect(t, f.request(base, message{id: "m-1", data: "x"}), http.StatusOK, "no key with AllowUnguarded")
		if n := b.count("m-1"); n != 1 {
			t.Fatalf("with AllowUnguarded the function ran %d times, want once", n)
		}
	})
}

func TestFunctionResultIsTheVerdict(t *testing.T) {
	tests := []struct {
		name      string
		result    error
		want      int
		wantRetry bool // the claim was released: a redelivery runs again
	}{
		{"acknowledging result", cehttp.NewResult(http.StatusNoContent, ""), http.StatusNoContent, false},
		{"rejecting result", cehttp.NewResult(http.StatusTooManyRequests, "slow down"), http.StatusTooManyRequests, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBody(func(ctx context.Context, e event.Event, run int) error {
				if run == 1 {
					return tt.result
				}
				return nil
			})
			base := serve(t, b, nil)
			msg := message{id: "m-1", data: "x"}
			expect(t, binaryRequest(base, msg), tt.want, "the function's own result")
			expect(t, binaryRequest(base, msg), http.StatusOK, "the redelivery")
			runs := 1
			if tt.wantRetry {
				runs = 2
			}
			if n := b.count("m-1"); n != runs {
				t.Fatalf("the function ran %d times, want %d", n, runs)
			}
		})
	}
}
