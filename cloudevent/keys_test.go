package cloudevent_test

import (
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

func TestKeyFuncs(t *testing.T) {
	msg := &pushenvelope.Message{ID: "m-1", Attributes: map[string]string{"order_id": "o-1"}}
	withID := pubsubEvent(t, "m-1", nil)
	storage := event.New()
	storage.SetID("e-1")
	storage.SetType("google.cloud.storage.object.v1.finalized")

	tests := []struct {
		name    string
		key     cloudevent.KeyFunc
		event   event.Event
		msg     *pushenvelope.Message
		want    string
		wantErr bool
	}{
		{"id", cloudevent.KeyFromID, withID, msg, "m-1", false},
		{"id of another event type", cloudevent.KeyFromID, storage, nil, "e-1", false},
		{"no id", cloudevent.KeyFromID, event.New(), nil, "", true},
		{"attribute", cloudevent.KeyFromAttribute("order_id"), withID, msg, "order_id:o-1", false},
		{"missing attribute", cloudevent.KeyFromAttribute("tenant"), withID, msg, "", true},
		{"attribute of another event type", cloudevent.KeyFromAttribute("order_id"), storage, nil, "", true},
		{"message key", cloudevent.KeyFromMessage(gateway.KeyFromMessageID), withID, msg, "m-1", false},
		{"message key of another event type", cloudevent.KeyFromMessage(gateway.KeyFromMessageID), storage, nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.key(tt.event, tt.msg)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("key = %q, %v; want %q (error: %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestKeysMatchTheHTTPMiddleware(t *testing.T) {
	// A function and a push endpoint sharing a store must agree on keys.
	msg := &pushenvelope.Message{ID: "m-1", Attributes: map[string]string{"order_id": "o-1"}}
	e := pubsubEvent(t, "m-1", nil)
	pairs := map[string][2]func() (string, error){
		"message id": {
			func() (string, error) { return cloudevent.KeyFromID(e, msg) },
			func() (string, error) { return gateway.KeyFromMessageID(msg) },
		},
		"attribute": {
			func() (string, error) { return cloudevent.KeyFromAttribute("order_id")(e, msg) },
			func() (string, error) { return gateway.KeyFromAttribute("order_id")(msg) },
		},
	}
	for name, p := range pairs {
		ce, err1 := p[0]()
		push, err2 := p[1]()
		if err1 != nil || err2 != nil || ce != push {
			t.Errorf("%s: cloudevent key %q (%v), HTTP key %q (%v); want equal", name, ce, err1, push, err2)
		}
	}
}

func TestKeyFromMessageRejectsNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("KeyFromMessage(nil) did not panic at construction")
		}
	}()
	cloudevent.KeyFromMessage(nil)
}
