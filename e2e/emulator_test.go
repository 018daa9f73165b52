package e2e

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/idemgate/idemgate/internal/testenv"
)

// defaultAckDeadline is the ack deadline of the tests' push subscriptions:
// the real service's minimum, and long enough that a busy machine never
// makes the emulator redeliver a push that is merely slow.
const defaultAckDeadline = 10 * time.Second

// broker is one test's view of the Pub/Sub emulator: a project of its own,
// and the topics and push subscriptions it made there, deleted when the
// test ends so that the emulator stops pushing to endpoints that are gone.
type broker struct {
	t       testing.TB
	project string
	client  *pubsub.Client
}

// newBroker connects to the shared emulator under a fresh project.
func newBroker(t testing.TB) *broker {
	t.Helper()
	host := testenv.PubSubEmulatorHost(t)
	project := testenv.PubSubProject(t)
	c, err := pubsub.NewClient(t.Context(), project, testenv.PubSubClientOptions(host)...)
	if err != nil {
		t.Fatalf("pubsub client for the emulator at %s: %v", host, err)
	}
	t.Cleanup(func() { c.Close() })
	return &broker{t: t, project: project, client: c}
}

// topic is a topic the test publishes to.
type topic struct {
	t    testing.TB
	name string
	pub  *pubsub.Publisher
}

// topic creates the topic id.
func (b *broker) topic(id string) *topic {
	b.t.Helper()
	name := "projects/" + b.project + "/topics/" + id
	if _, err := b.client.TopicAdminClient.CreateTopic(b.t.Context(), &pubsubpb.Topic{Name: name}); err != nil {
		b.t.Fatalf("CreateTopic %s: %v", name, err)
	}
	pub := b.client.Publisher(name)
	b.t.Cleanup(func() {
		pub.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.client.TopicAdminClient.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: name})
	})
	return &topic{t: b.t, name: name, pub: pub}
}

// push creates the push subscription id on tp, delivering to endpoint (a
// full URL) with the given ack deadline. No retry policy is set: the
// emulator then redelivers a nacked message after about a second, while a
// policy makes it wait longer, whatever its backoff bounds.
func (b *broker) push(tp *topic, id, endpoint string, ackDeadline time.Duration) {
	b.t.Helper()
	name := "projects/" + b.project + "/subscriptions/" + id
	_, err := b.client.SubscriptionAdminClient.CreateSubscription(b.t.Context(), &pubsubpb.Subscription{
		Name:               name,
		Topic:              tp.name,
		AckDeadlineSeconds: int32(ackDeadline / time.Second),
		PushConfig:         &pubsubpb.PushConfig{PushEndpoint: endpoint},
	})
	if err != nil {
		b.t.Fatalf("CreateSubscription %s → %s: %v", name, endpoint, err)
	}
	b.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: name})
	})
}

// publish publishes msgs in one burst (the client batches them) and
// returns the message IDs the emulator gave them, in order.
func (tp *topic) publish(msgs ...*pubsub.Message) []string {
	tp.t.Helper()
	ctx := tp.t.Context()
	results := make([]*pubsub.PublishResult, len(msgs))
	for i, m := range msgs {
		results[i] = tp.pub.Publish(ctx, m)
	}
	ids := make([]string, len(msgs))
	for i, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			tp.t.Fatalf("publish to %s: %v", tp.name, err)
		}
		ids[i] = id
	}
	return ids
}

// order is a message about one order, as the producer of the examples
// publishes it: the order ID in the order_id attribute and in the data.
func order(id string) *pubsub.Message {
	return &pubsub.Message{
		Data:       []byte(`{"order_id":"` + id + `"}`),
		Attributes: map[string]string{"order_id": id},
	}
}

// poUpdate is one update of purchase order po.
func poUpdate(po string, n int) *pubsub.Message {
	return &pubsub.Message{
		Data:       []byte(`{"po_id":"` + po + `","update":` + itoa(n) + `}`),
		Attributes: map[string]string{"po_id": po},
	}
}
