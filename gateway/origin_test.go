package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
)

// The record names the delivery that did the work, surface and message id
// ("which message did the work?"), on every push form; the handler's own
// Locks (child keys) name the same delivery, and a Lock called directly
// names none unless its caller does.
func TestRecordNamesTheDelivery(t *testing.T) {
	byAttr := gateway.KeyFromAttribute("order_id")
	for _, tc := range []struct {
		name, body string
		hdr        http.Header
		key        gateway.KeyFunc
		storeKey   string
		want       string
	}{
		{name: "wrapped", body: push("m-101", nil, "x"), storeKey: "m-101", want: "push/m-101"},
		{name: "unwrapped", body: "x", hdr: http.Header{"X-Goog-Pubsub-Message-Id": {"m-102"}}, storeKey: "m-102", want: "push/m-102"},
		{name: "unwrapped without a message id", body: "x", hdr: http.Header{"X-Goog-Pubsub-Message-Id": {""}, "Order_id": {"o-1"}},
			key: byAttr, storeKey: "order_id:o-1", want: "push"},
		{name: "binary CloudEvent", body: `{"message":{"messageId":"m-103","data":"eA=="},"subscription":"projects/p/subscriptions/s"}`,
			hdr: http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"m-103"}, "Ce-Source": {"//pubsub.googleapis.com/projects/p/topics/t"},
				"Ce-Type": {"google.cloud.pubsub.topic.v1.messagePublished"}, "Content-Type": {"application/json"}},
			storeKey: "m-103", want: "cloudevent/m-103"},
		{name: "message id of control characters", body: push("a\nb\x1b", nil, "x"), storeKey: "a\nb\x1b", want: "push/a\uFFFDb\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, gateway.Options{})
			g := f.g
			if tc.key != nil {
				g = g.Route(&gateway.RouteOptions{Key: tc.key})
			}
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := f.g.Lock(r.Context(), "child:"+tc.storeKey, func(context.Context) error { return nil }); err != nil {
					t.Errorf("the handler's Lock on a child key: %v", err)
				}
			})
			wantStatus(t, deliverTo(t, g.Idempotent(h), "/", tc.body, tc.hdr), http.StatusOK, tc.name)
			for _, key := range []string{tc.storeKey, "child:" + tc.storeKey} {
				r, ok, err := f.st.Inspect(t.Context(), key)
				if err != nil || !ok || r.State != store.Done || r.Origin != tc.want {
					t.Errorf("Inspect(%q) = %+v, %v, %v; want DONE with origin %q", key, r, ok, err, tc.want)
				}
			}
		})
	}

	f := newFixture(t, gateway.Options{})
	if err := f.g.Lock(t.Context(), "direct", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.g.Lock(gateway.WithOrigin(t.Context(), "job/nightly"), "named", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"direct": "", "named": "job/nightly"} {
		if r, ok, err := f.st.Inspect(t.Context(), key); err != nil || !ok || r.Origin != want {
			t.Errorf("Inspect(%q) after a direct Lock = %+v, %v, %v; want origin %q", key, r, ok, err, want)
		}
	}
}

// The duplicate line names the delivery that did the work (done_by), and
// the in-progress line the one at work (held_by); with HideKeys as well,
// since an origin holds no key.
func TestLinesNameTheWinner(t *testing.T) {
	for _, hide := range []bool{false, true} {
		f := newFixture(t, gateway.Options{HideKeys: hide})
		route := f.g.Route(&gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")})
		order := map[string]string{"order_id": "o-1"}
		inside, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(inside); <-release })
		})
		srv := route.Idempotent(h)
		done := make(chan struct{})
		go func() {
			defer close(done)
			wantStatus(t, deliverTo(t, srv, "/orders", push("m-101", order, "x"), nil), http.StatusOK, "the first delivery")
		}()
		<-inside
		wantStatus(t, deliverTo(t, srv, "/orders", push("m-102", order, "x"), nil), http.StatusServiceUnavailable, "a copy while the first runs")
		close(release)
		<-done
		wantStatus(t, deliverTo(t, srv, "/orders", push("m-103", order, "x"), nil), http.StatusNoContent, "a copy after the first")

		recs := f.logs.Records()
		held := recs.Outcome(gateway.OutcomeInProgress).With("delivery.message_id", "m-102")
		if len(held) != 1 || held[0].Attrs["held_by"] != "push/m-101" {
			t.Errorf("HideKeys=%v: in-progress line of m-102 = %v; want held_by push/m-101", hide, held)
		}
		dup := recs.Outcome(gateway.OutcomeDuplicate).With("delivery.message_id", "m-103")
		if len(dup) != 1 || dup[0].Attrs["done_by"] != "push/m-101" {
			t.Errorf("HideKeys=%v: duplicate line of m-103 = %v; want done_by push/m-101", hide, dup)
		}
		for _, r := range recs {
			for k, v := range r.Attrs {
				if hide && strings.Contains(v, "o-1") {
					t.Errorf("HideKeys: %s = %q holds the key in %v", k, v, r)
				}
			}
		}
	}
}
