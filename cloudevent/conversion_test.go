package cloudevent_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/pushenvelope"
)

// These tests pin what functions-framework and the CloudEvents SDK do with
// unusual deliveries before Wrap sees them: events without an id, push
// bodies and their topic path, malformed data, other event types. A
// framework upgrade that changes any of it fails here; docs/cloudfunctions.md
// describes the same rules.

func TestEventWithoutIDNeverRuns(t *testing.T) {
	// The SDK rejects an event without an id (400) before any function runs.
	// A binary event without Ce-Id is first taken by functions-framework for
	// a legacy push body, and fails the same way when its data has no
	// messageId either.
	eachForm(t, func(t *testing.T, f form) {
		b := newBody(nil)
		base := serve(t, b, nil)
		expect(t, f.request(base, message{data: "x"}), http.StatusBadRequest, "an event without an id")
		if n := b.count(""); n != 0 {
			t.Fatalf("the function ran %d times for an event without an id", n)
		}
	})
}

func TestBinaryWithoutCeIDIsReadAsAPush(t *testing.T) {
	// functions-framework converts any request that has no Ce-Id header and
	// no cloudevents Content-Type as a legacy push; messagePublished data has
	// the push body's shape, so the event comes back with the data's
	// messageId as its id, and the topic taken from the request path.
	b := newBody(nil)
	base := serve(t, b, nil)
	r := binaryRequest(base, message{id: "m-1", data: "x"})
	r.Header.Del("Ce-Id")
	expect(t, r, http.StatusOK, "binary event without Ce-Id")
	if n := b.count("m-1"); n != 1 {
		t.Fatalf("the function ran %d times for id m-1, want once", n)
	}
	if got := b.last(t).Message.Source; got != "//pubsub.googleapis.com/" {
		t.Errorf("source = %q, want the framework's topic-less //pubsub.googleapis.com/", got)
	}
}

func TestLegacyPushTopicFromPath(t *testing.T) {
	// functions-framework finds the topic with the unanchored pattern
	// projects/[^/?]+/topics/[^/?]+ anywhere in the request path; without a
	// match it prints a WARNING and the source has no topic, but the event
	// still runs, keyed by its messageId.
	tests := []struct {
		name, path, wantSource string
	}{
		{"topic path", "/projects/acme/topics/orders", testSource},
		{"topic after a prefix", "/push/projects/acme/topics/orders/tail?token=x", testSource},
		{"no topic", "/", "//pubsub.googleapis.com/"},
		{"subscription path", "/projects/acme/subscriptions/orders-push", "//pubsub.googleapis.com/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBody(nil)
			base := serve(t, b, nil)
			msg := message{id: "m-1", data: "x"}
			expect(t, legacyPushRequest(base+tt.path, msg), http.StatusOK, "legacy push")
			expect(t, legacyPushRequest(base+tt.path, msg), http.StatusOK, "its redelivery")
			if n := b.count("m-1"); n != 1 {
				t.Fatalf("the function ran %d times, want once", n)
			}
			if got := b.last(t).Message.Source; got != tt.wantSource {
				t.Errorf("source = %q, want %q", got, tt.wantSource)
			}
		})
	}
}

func TestMalformedPubSubEventIsRejected(t *testing.T) {
	b := newBody(nil)
	base := serve(t, b, nil)
	r := newPost(base+"/", "application/json", map[string]any{"subscription": "projects/acme/subscriptions/s"})
	r.Header.Set("Ce-Id", "m-1")
	r.Header.Set("Ce-Specversion", "1.0")
	r.Header.Set("Ce-Type", pushenvelope.MessagePublishedType)
	r.Header.Set("Ce-Source", testSource)
	code, text := deliver(t, r)
	if code != http.StatusBadRequest || !strings.Contains(text, "not a Pub/Sub message") {
		t.Fatalf("messagePublished event without a message: %d %q, want 400", code, text)
	}
	if n := b.count("m-1"); n != 0 {
		t.Fatalf("the function ran %d times on malformed data", n)
	}
}

func TestOtherEventTypesAreKeyedBySourceAndID(t *testing.T) {
	b := newBody(nil)
	base := serve(t, b, nil)
	storage := func() *http.Request {
		r := newPost(base+"/", "application/json", map[string]any{"bucket": "b", "name": "invoice.pdf"})
		r.Header.Set("Ce-Id", "e-1")
		r.Header.Set("Ce-Specversion", "1.0")
		r.Header.Set("Ce-Type", "google.cloud.storage.object.v1.finalized")
		r.Header.Set("Ce-Source", "//storage.googleapis.com/projects/_/buckets/b")
		r.Header.Set("Ce-Subject", "objects/invoice.pdf")
		return r
	}
	expect(t, storage(), http.StatusOK, "a storage event")
	expect(t, storage(), http.StatusOK, "its redelivery")
	if n := b.count("e-1"); n != 1 {
		t.Fatalf("the function ran %d times, want once", n)
	}
	const key = "45://storage.googleapis.com/projects/_/buckets/b:e-1"
	if got := b.last(t); got.Message != nil || got.ClaimKey != key {
		t.Errorf("a storage event saw message %v and claim key %q, want none and %q", got.Message, got.ClaimKey, key)
	}
}

func TestOtherEventTypesFromTwoSources(t *testing.T) {
	// Event 1042 of one bucket and event 1042 of another are two events: the
	// default key covers the source as well as the id.
	var mu sync.Mutex
	ran := map[string]int{}
	base := serveFunction(t, cloudevent.Wrap(newGateway(t, nil), func(_ context.Context, e event.Event) error {
		mu.Lock()
		defer mu.Unlock()
		ran[e.Source()]++
		return nil
	}, &cloudevent.Options{Logger: quiet()}))
	storage := func(bucket string) *http.Request {
		r := newPost(base+"/", "application/json", map[string]any{"bucket": bucket, "name": "invoice.pdf"})
		r.Header.Set("Ce-Id", "1042")
		r.Header.Set("Ce-Specversion", "1.0")
		r.Header.Set("Ce-Type", "google.cloud.storage.object.v1.finalized")
		r.Header.Set("Ce-Source", "//storage.googleapis.com/projects/_/buckets/"+bucket)
		return r
	}
	expect(t, storage("a"), http.StatusOK, "event 1042 of bucket a")
	expect(t, storage("b"), http.StatusOK, "event 1042 of bucket b")
	expect(t, storage("a"), http.StatusOK, "a redelivery of bucket a's event")
	expect(t, storage("b"), http.StatusOK, "a redelivery of bucket b's event")
	mu.Lock()
	defer mu.Unlock()
	for _, bucket := range []string{"a", "b"} {
		if n := ran["//storage.googleapis.com/projects/_/buckets/"+bucket]; n != 1 {
			t.Errorf("event 1042 of bucket %s ran %d times, want once", bucket, n)
		}
	}
}
