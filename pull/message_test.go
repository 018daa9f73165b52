package pull

import (
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// A key function sees a pulled message as it would see the same message
// pushed, so push and pull consumers of one store agree on its key.
func TestMessageOf(t *testing.T) {
	published := time.Date(2026, 3, 1, 10, 15, 0, 250_000_000, time.FixedZone("CET", 3600))
	attempt := 4
	m := &pubsub.Message{
		ID: "m-1", Data: []byte("order"), Attributes: map[string]string{"order_id": "42"},
		PublishTime: published, OrderingKey: "customer-7", DeliveryAttempt: &attempt,
	}
	want := &pushenvelope.Message{
		ID: "m-1", Data: []byte("order"), Attributes: map[string]string{"order_id": "42"},
		PublishTime: published.UTC(), OrderingKey: "customer-7", DeliveryAttempt: 4,
		Subscription: "projects/p/subscriptions/orders",
	}
	got := messageOf(m, "projects/p/subscriptions/orders")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("messageOf (-want +got):\n%s", diff)
	}
	for name, key := range map[string]gateway.KeyFunc{
		"KeyFromMessageID": gateway.KeyFromMessageID,
		"KeyFromAttribute": gateway.KeyFromAttribute("order_id"),
	} {
		pulled, err1 := key(got)
		pushed, err2 := key(want)
		if pulled != pushed || err1 != nil || err2 != nil {
			t.Errorf("%s: pulled %q (%v), pushed %q (%v); want one key", name, pulled, err1, pushed, err2)
		}
	}

	bare := messageOf(&pubsub.Message{ID: "m-2"}, "")
	if bare.Attributes == nil || bare.DeliveryAttempt != 0 {
		t.Fatalf("messageOf a bare message = %+v; want empty, non-nil attributes and attempt 0", bare)
	}
	if _, err := gateway.KeyFromAttribute("order_id")(bare); err == nil {
		t.Fatal("KeyFromAttribute on a message without the attribute must fail (fail closed)")
	}
}
