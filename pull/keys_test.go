package pull_test

import (
	"testing"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/pushenvelope"
)

func TestKeyFuncs(t *testing.T) {
	tests := []struct {
		name    string
		key     pull.KeyFunc
		msg     *pubsub.Message
		want    string
		wantErr bool
	}{
		{"message ID", pull.KeyFromMessageID, &pubsub.Message{ID: "17"}, "17", false},
		{"no message ID", pull.KeyFromMessageID, &pubsub.Message{}, "", true},
		{"attribute", pull.KeyFromAttribute("order_id"), &pubsub.Message{ID: "17", Attributes: map[string]string{"order_id": "42"}}, "order_id:42", false},
		{"attribute missing", pull.KeyFromAttribute("order_id"), &pubsub.Message{ID: "17", Attributes: map[string]string{"po_id": "42"}}, "", true},
		{"attribute empty", pull.KeyFromAttribute("order_id"), &pubsub.Message{ID: "17", Attributes: map[string]string{"order_id": ""}}, "", true},
		{"no attributes", pull.KeyFromAttribute("order_id"), &pubsub.Message{ID: "17"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.key(tt.msg)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("key = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// Push and pull consumers of one store must agree on keys, so that a
// message delivered both ways (or an order published to a push and a pull
// subscription) runs once.
func TestKeysAgreeWithGateway(t *testing.T) {
	attrs := map[string]string{"order_id": "42"}
	pullKey, err := pull.KeyFromAttribute("order_id")(&pubsub.Message{ID: "17", Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	pushKey, err := gateway.KeyFromAttribute("order_id")(&pushenvelope.Message{ID: "17", Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	if pullKey != pushKey {
		t.Errorf("pull key %q, push key %q: KeyFromAttribute must make the same key both ways", pullKey, pushKey)
	}
	pullKey, _ = pull.KeyFromMessageID(&pubsub.Message{ID: "17"})
	pushKey, _ = gateway.KeyFromMessageID(&pushenvelope.Message{ID: "17"})
	if pullKey != pushKey {
		t.Errorf("pull key %q, push key %q: KeyFromMessageID must make the same key both ways", pullKey, pushKey)
	}
}
