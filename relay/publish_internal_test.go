package relay

import (
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/outbox"
)

// TestRequestLimitIsTheClients holds requestLimit to the Pub/Sub client's
// own count: a message of requestLimit bytes (as outbox.PublishSize counts
// them) is one the client sends in a request of its own, and a byte more
// is one it refuses as oversized. A larger limit would let a key's share
// of a round spill into a second request, answered after the first.
func TestRequestLimitIsTheClients(t *testing.T) {
	t.Parallel() // it waits out real time: a lease, or the client's publish timeout
	ctx := t.Context()
	_, c := fakepubsub.NewProject(t, "p")
	const name = "projects/p/topics/orders"
	limit := requestLimit(name)
	buf := make([]byte, pubsub.MaxPublishRequestBytes)
	attrs := map[string]string{outbox.ChildKeyAttribute: outbox.ChildKey("parent", "0")}
	// The data whose message counts exactly limit bytes: its length
	// prefix grows with it, so search down from the limit.
	n := limit
	for outbox.PublishSize(outbox.Message{Data: buf[:n], Attributes: attrs, OrderingKey: "k"}) > limit {
		n--
	}
	if got := outbox.PublishSize(outbox.Message{Data: buf[:n], Attributes: attrs, OrderingKey: "k"}); got != limit {
		t.Fatalf("no message counts exactly %d bytes (nearest %d)", limit, got)
	}
	pub := c.Publisher(name)
	pub.EnableMessageOrdering = true
	// pstest takes no request over gRPC's 4 MiB: only whether the client
	// refused the message itself matters.
	pub.PublishSettings.Timeout = time.Second
	defer pub.Stop()
	for _, size := range []int{n, n + 1} {
		_, err := pub.Publish(ctx, &pubsub.Message{Data: buf[:size], Attributes: attrs, OrderingKey: "k"}).Get(ctx)
		if oversized := errors.Is(err, pubsub.ErrOversizedMessage); oversized != (size > n) {
			t.Errorf("%d data bytes: the client refuses it as oversized: %v; requestLimit(%q) = %d says %v", size, oversized, name, limit, size > n)
		}
		pub.ResumePublish("k")
	}
}
