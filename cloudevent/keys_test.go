package cloudevent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// Wrap keys every event with a gateway.KeyFunc, the key function type of
// push and pull too: a Pub/Sub event through its decoded message, so that a
// function and a push endpoint sharing a store agree on keys; any other
// event through a message of its own id, source and data.
func TestWrapKeys(t *testing.T) {
	pubsub := pubsubEvent(t, "m-1", map[string]string{"order_id": "o-1"})
	pushed := &pushenvelope.Message{ID: "m-1", Attributes: map[string]string{"order_id": "o-1"}}
	storage := event.New()
	storage.SetID("e-1")
	storage.SetSource("//storage.googleapis.com/projects/_/buckets/b")
	storage.SetType("google.cloud.storage.object.v1.finalized")

	tests := []struct {
		name    string
		key     gateway.KeyFunc
		event   event.Event
		want    string // the key the function ran under; "" for none
		wantErr bool
	}{
		{"default, Pub/Sub event", nil, pubsub, must(gateway.KeyFromMessageID(pushed)), false},
		{"default, another event type", nil, storage, "45://storage.googleapis.com/projects/_/buckets/b:e-1", false},
		{"message id, another event type", gateway.KeyFromMessageID, storage, "e-1", false},
		{"attribute", gateway.KeyFromAttribute("order_id"), pubsub, must(gateway.KeyFromAttribute("order_id")(pushed)), false},
		{"missing attribute", gateway.KeyFromAttribute("tenant"), pubsub, "", true},
		{"attribute of another event type", gateway.KeyFromAttribute("order_id"), storage, "", true},
		{"source of another event type", func(m *pushenvelope.Message) (string, error) { return m.Source + "/" + m.ID, nil }, storage, "//storage.googleapis.com/projects/_/buckets/b/e-1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			fn := cloudevent.Wrap(newGateway(t, nil), func(ctx context.Context, e event.Event) error {
				c, _ := gateway.ClaimFromContext(ctx)
				got = c.Key
				return nil
			}, &cloudevent.Options{Route: gateway.RouteOptions{Key: tt.key}, Logger: quiet()})
			err := fn(t.Context(), tt.event)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ran under key %q, Wrap answered %v; want key %q (failing closed: %v)", got, err, tt.want, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, gateway.ErrNoKey) {
				t.Fatalf("Wrap answered %v; want an error wrapping gateway.ErrNoKey", err)
			}
		})
	}
}

// storageEvent is a Cloud Storage event, no Pub/Sub message: source and id
// as given.
func storageEvent(source, id string) event.Event {
	e := event.New()
	e.SetID(id)
	e.SetSource(source)
	e.SetType("google.cloud.storage.object.v1.finalized")
	return e
}

// The CloudEvents spec makes source and id unique together, not the id
// alone: by default two events that share an id but not a source both run,
// and only the same source and id again is a duplicate. Sources that contain
// the separator must not collide with another source and id either.
func TestDefaultKeyIncludesTheSource(t *testing.T) {
	ran := map[[2]string]int{}
	fn := cloudevent.Wrap(newGateway(t, nil), func(ctx context.Context, e event.Event) error {
		ran[[2]string{e.Source(), e.ID()}]++
		return nil
	}, &cloudevent.Options{Logger: quiet()})
	events := [][2]string{
		{"//storage.googleapis.com/projects/_/buckets/a", "1042"},
		{"//storage.googleapis.com/projects/_/buckets/b", "1042"},
		// The same bytes split differently between source and id.
		{"s:1", "x"}, {"s", "1:x"}, {"s:", "1x"}, {"urn:a", "b:c"}, {"urn:a:b", "c"}, {"", "1:s:1x"}, {"1", ":1:x"},
	}
	for _, ev := range events {
		if err := fn(t.Context(), storageEvent(ev[0], ev[1])); err != nil {
			t.Fatalf("event %q from %q: %v", ev[1], ev[0], err)
		}
	}
	for _, ev := range events { // redeliveries
		if err := fn(t.Context(), storageEvent(ev[0], ev[1])); err != nil {
			t.Fatalf("redelivery of %q from %q: %v", ev[1], ev[0], err)
		}
	}
	for _, ev := range events {
		if n := ran[ev]; n != 1 {
			t.Errorf("event %q from source %q ran %d times, want once", ev[1], ev[0], n)
		}
	}
}
