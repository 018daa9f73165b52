package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// TestStartPubSubEmulator starts a private emulator the way
// PubSubEmulatorHost does when PUBSUB_EMULATOR_HOST is not set, and makes
// a round trip through it with the Go client: create a topic and a
// subscription, publish, pull, ack.
func TestStartPubSubEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Pub/Sub emulator (a JVM)")
	}
	s := Private(t, "Pub/Sub emulator", StartPubSubEmulator)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	project := PubSubProject(t)
	c, err := pubsub.NewClient(ctx, project, PubSubClientOptions(s.Addr)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/" + project + "/topics/probe"})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	sub, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/probe", Topic: topic.Name,
	})
	if err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	pub := c.Publisher(topic.Name)
	defer pub.Stop()
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("hello")}).Get(ctx); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := make(chan string, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	err = c.Subscriber(sub.Name).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		select {
		case got <- string(m.Data):
		default:
		}
		stop()
	})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	select {
	case data := <-got:
		if data != "hello" {
			t.Errorf("received %q, want hello", data)
		}
	default:
		t.Fatal("Receive returned without a message")
	}
}

func TestPubSubProject(t *testing.T) {
	a, b := PubSubProject(t), PubSubProject(t)
	if a == b {
		t.Errorf("PubSubProject returned %q twice; want a unique ID per call", a)
	}
	for _, p := range []string{a, b} {
		if len(p) > 30 || !strings.HasPrefix(p, "t-") || strings.HasSuffix(p, "-") || strings.ToLower(p) != p {
			t.Errorf("PubSubProject() = %q, not a valid project ID", p)
		}
	}
}
