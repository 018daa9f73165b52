package cloudevent_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/answertable"
	"github.com/idemgate/idemgate/internal/claimwatch"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// answerCase produces one row of docs/design.md's table of answers through
// functions-framework, on a platform, and returns the status the caller
// saw.
type answerCase struct {
	row     string
	produce func(t *testing.T, p cloudevent.Platform) int
}

// servePlatform wraps b for platform p over st (nil: a fresh memstore) and
// serves it through the framework.
func servePlatform(t *testing.T, st store.Store, b *body, opts cloudevent.Options, p cloudevent.Platform) string {
	t.Helper()
	opts.Logger, opts.Platform = quiet(), p
	return serveFunction(t, cloudevent.Wrap(newGateway(t, st), b.run, &opts))
}

// byOrder keys on the order_id attribute and fingerprints the payload, so
// that an order sent twice with other data is a conflict.
func byOrder(accept bool) cloudevent.Options {
	return cloudevent.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload, AcceptConflicts: new(accept)}}
}

func conflict(accept bool) func(t *testing.T, p cloudevent.Platform) int {
	return func(t *testing.T, p cloudevent.Platform) int {
		base := servePlatform(t, nil, newBody(nil), byOrder(accept), p)
		order := map[string]string{"order_id": "o-1"}
		expect(t, binaryRequest(base, message{id: "m-1", data: "x", attrs: order}), http.StatusOK, "the first order")
		code, _ := deliver(t, binaryRequest(base, message{id: "m-2", data: "y", attrs: order}))
		return code
	}
}

// serveGateway wraps b with g for platform p and serves it through the
// framework.
func serveGateway(t *testing.T, g *gateway.Gateway, b *body, p cloudevent.Platform) string {
	t.Helper()
	return serveFunction(t, cloudevent.Wrap(g, b.run, &cloudevent.Options{Logger: quiet(), Platform: p}))
}

// failing delivers an event whose function fails for good
// (gateway.Permanent) deliveries times, under gateway options o, and
// returns the last answer; the function must have run once.
func failing(o gateway.Options, deliveries int) func(t *testing.T, p cloudevent.Platform) int {
	return func(t *testing.T, p cloudevent.Platform) int {
		st, err := memstore.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		o.Logger = quiet()
		g, err := gateway.New(st, &o)
		if err != nil {
			t.Fatal(err)
		}
		b := newBody(func(context.Context, event.Event, int) error { return gateway.Permanent(errors.New("customer gone")) })
		base := serveGateway(t, g, b, p)
		var code int
		for range deliveries {
			code, _ = deliver(t, binaryRequest(base, message{id: "m-1", data: "x"}))
		}
		if n := b.count("m-1"); n != 1 {
			t.Errorf("the function ran %d times, want once", n)
		}
		return code
	}
}

var answerCases = []answerCase{
	{"won", func(t *testing.T, p cloudevent.Platform) int {
		code, _ := deliver(t, binaryRequest(servePlatform(t, nil, newBody(nil), cloudevent.Options{}, p), message{id: "m-1", data: "x"}))
		return code
	}},
	{"duplicate", func(t *testing.T, p cloudevent.Platform) int {
		base := servePlatform(t, nil, newBody(nil), cloudevent.Options{}, p)
		expect(t, binaryRequest(base, message{id: "m-1", data: "x"}), http.StatusOK, "the first delivery")
		code, _ := deliver(t, binaryRequest(base, message{id: "m-1", data: "x"}))
		return code
	}},
	{"in_progress", func(t *testing.T, p cloudevent.Platform) int {
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unblock)
		b := newBody(func(ctx context.Context, e event.Event, run int) error {
			if run == 1 {
				close(started)
				<-release
			}
			return nil
		})
		base := servePlatform(t, nil, b, cloudevent.Options{}, p)
		first := make(chan int, 1)
		go func() {
			code, _, _ := send(context.Background(), binaryRequest(base, message{id: "m-1", data: "x"}))
			first <- code
		}()
		<-started
		code, _ := deliver(t, binaryRequest(base, message{id: "m-1", data: "x"}))
		unblock()
		if c := <-first; c != http.StatusOK {
			t.Errorf("the holder answered %d, want 200", c)
		}
		return code
	}},
	{"failed", func(t *testing.T, p cloudevent.Platform) int {
		b := newBody(func(context.Context, event.Event, int) error { return errors.New("supplier down") })
		code, _ := deliver(t, binaryRequest(servePlatform(t, nil, b, cloudevent.Options{}, p), message{id: "m-1", data: "x"}))
		return code
	}},
	{"panic", func(t *testing.T, p cloudevent.Platform) int {
		b := newBody(func(context.Context, event.Event, int) error { panic("bug in the function") })
		code, _ := deliver(t, binaryRequest(servePlatform(t, nil, b, cloudevent.Options{}, p), message{id: "m-1", data: "x"}))
		return code
	}},
	{"abandoned", failing(gateway.Options{}, 1)},
	{"already_failed", failing(gateway.Options{}, 2)},
	{"failed_acked", failing(gateway.Options{AckFailed: true}, 2)},
	{"waited", func(t *testing.T, p cloudevent.Platform) int {
		st, err := claimwatch.New()
		if err != nil {
			t.Fatal(err)
		}
		g, err := gateway.New(st, &gateway.Options{Logger: quiet(), WaitForHolder: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		started, release := make(chan struct{}), make(chan struct{})
		b := newBody(func(ctx context.Context, e event.Event, run int) error {
			if run == 1 {
				close(started)
				<-release
			}
			return nil
		})
		base := serveGateway(t, g, b, p)
		first, copied := make(chan int, 1), make(chan int, 1)
		go func() {
			code, _, _ := send(context.Background(), binaryRequest(base, message{id: "m-1", data: "x"}))
			first <- code
		}()
		<-started
		go func() {
			code, _, _ := send(context.Background(), binaryRequest(base, message{id: "m-1", data: "x"}))
			copied <- code
		}()
		<-st.Held() // the copy met the holder, and waits
		close(release)
		if c := <-first; c != http.StatusOK {
			t.Errorf("the holder answered %d, want 200", c)
		}
		code := <-copied
		if n := b.count("m-1"); n != 1 {
			t.Errorf("the function ran %d times, want once", n)
		}
		return code
	}},
	{"conflict", conflict(false)},
	{"conflict_accepted", conflict(true)},
	{"no_key", func(t *testing.T, p cloudevent.Platform) int {
		code, _ := deliver(t, binaryRequest(servePlatform(t, nil, newBody(nil), byOrder(false), p), message{id: "m-1", data: "x"}))
		return code
	}},
	{"rejected", func(t *testing.T, p cloudevent.Platform) int {
		base := servePlatform(t, nil, newBody(nil), cloudevent.Options{}, p)
		r := newPost(base+"/", "application/json", map[string]any{"subscription": "projects/acme/subscriptions/s"})
		r.Header.Set("Ce-Id", "m-1")
		r.Header.Set("Ce-Specversion", "1.0")
		r.Header.Set("Ce-Type", pushenvelope.MessagePublishedType)
		r.Header.Set("Ce-Source", testSource)
		code, _ := deliver(t, r)
		return code
	}},
	{"store_error", func(t *testing.T, p cloudevent.Platform) int {
		code, _ := deliver(t, binaryRequest(servePlatform(t, brokenStore{}, newBody(nil), cloudevent.Options{}, p), message{id: "m-1", data: "x"}))
		return code
	}},
	{"cancelled", func(t *testing.T, p cloudevent.Platform) int {
		// A request that ended has nobody to read its answer, so this
		// case calls the wrapped function as the framework does and
		// reads the status it would write from the result.
		fn := cloudevent.Wrap(newGateway(t, nil), newBody(nil).run, &cloudevent.Options{Logger: quiet(), Platform: p})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		e := event.New()
		e.SetID("m-1")
		e.SetSource("//example.com/orders")
		e.SetType("com.example.order.placed")
		var res *cehttp.Result
		if err := fn(ctx, e); !errors.As(err, &res) {
			t.Fatalf("a cancelled event returned %v, want a *cehttp.Result", err)
		}
		return res.StatusCode
	}},
}

// TestAnswerTable holds the columns of docs/design.md's table of answers
// for CloudEvents: each row, produced through functions-framework on each
// platform, answers the status the table says, and the table has a row
// for each case.
func TestAnswerTable(t *testing.T) {
	table, err := answertable.Read("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	for col, p := range map[string]cloudevent.Platform{
		"CloudEvents, Eventarc standard": cloudevent.Eventarc,
		"Eventarc Advanced":              cloudevent.EventarcAdvanced,
	} {
		want := table.Column(col)
		got := map[string]string{}
		for _, c := range answerCases {
			t.Run(p.String()+"/"+c.row, func(t *testing.T) {
				got[c.row] = strconv.Itoa(c.produce(t, p))
			})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("column %q of docs/design.md's table (-doc +%s):\n%s", col, p, diff)
		}
	}
}

func TestWrapRefusesAnUnknownPlatform(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Wrap accepted Platform(7)")
		}
	}()
	cloudevent.Wrap(newGateway(t, nil), newBody(nil).run, &cloudevent.Options{Platform: 7})
}

// On Eventarc Advanced a function's own status that the pipeline does not
// retry (a 400) ends the delivery; the record goes FAILED, so that
// idemgate failed lists the event, instead of being only released. A
// status it retries (503) is released for the retry, and on Eventarc
// standard, which retries every failure, nothing goes FAILED.
func TestAdvancedPersistentStatusFails(t *testing.T) {
	for _, tc := range []struct {
		p      cloudevent.Platform
		status int
		failed bool
	}{
		{cloudevent.EventarcAdvanced, http.StatusBadRequest, true},
		{cloudevent.EventarcAdvanced, http.StatusServiceUnavailable, false},
		{cloudevent.Eventarc, http.StatusBadRequest, false},
	} {
		st, err := memstore.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		b := newBody(func(context.Context, event.Event, int) error { return cehttp.NewResult(tc.status, "bad order") })
		code, _ := deliver(t, binaryRequest(servePlatform(t, st, b, cloudevent.Options{}, tc.p), message{id: "m-1", data: "x"}))
		if code != tc.status {
			t.Errorf("%v, function answering %d: the framework answered %d, want the function's own status", tc.p, tc.status, code)
		}
		if r, _, _ := st.Inspect(t.Context(), "m-1"); (r.State == store.Failed) != tc.failed {
			t.Errorf("%v, function answering %d: record %v, want FAILED %v", tc.p, tc.status, r.State, tc.failed)
		}
	}
}
