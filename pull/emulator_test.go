package pull_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/store/memstore"
)

// TestEmulator runs Wrap against Google's Pub/Sub emulator: a handler that
// fails once is retried and succeeds once, a republished order runs once,
// and every message is acked.
func TestEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Pub/Sub emulator (a JVM)")
	}
	checkLeaks(t)
	host := testenv.PubSubEmulatorHost(t)
	ctx := t.Context()
	project := testenv.PubSubProject(t)
	c, err := pubsub.NewClient(ctx, project, testenv.PubSubClientOptions(host)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	topic, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/" + project + "/topics/orders"})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	sub, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/orders-sub", Topic: topic.Name, AckDeadlineSeconds: 10,
	})
	if err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}

	pub := c.Publisher(topic.Name)
	var ids []string
	for _, order := range []string{"A", "B", "B", "C"} { // B is republished
		id, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("order " + order), Attributes: map[string]string{"order_id": order}}).Get(ctx)
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
		ids = append(ids, id)
	}
	pub.Stop()

	logs := &logtest.Sink{}
	st, _ := memstore.New(nil)
	g, err := gateway.New(st, &gateway.Options{Logger: slog.New(logs.Handler())})
	if err != nil {
		t.Fatal(err)
	}
	var attempts, done counter
	rctx, cancel := context.WithCancel(context.Background())
	received := make(chan error, 1)
	go func() {
		received <- c.Subscriber(sub.Name).Receive(rctx, pull.Wrap(g, func(_ context.Context, m *pubsub.Message) error {
			order := m.Attributes["order_id"]
			if attempts.inc(order) == 1 && order == "A" {
				return errors.New("supplier down")
			}
			done.inc(order)
			return nil
		}, &pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}, Logger: slog.New(logs.Handler()), Subscription: sub.Name, InProgressDelay: 10 * time.Millisecond}))
	}()
	logs.Wait(t, waitFor, "an ack of every message", func(recs logtest.Records) bool {
		for _, id := range ids {
			if len(matching(recs, gateway.OutcomeWon, id))+len(matching(recs, gateway.OutcomeDuplicate, id)) == 0 {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-received; err != nil {
		t.Errorf("Receive: %v", err)
	}

	for order, want := range map[string]int{"A": 2, "B": 1, "C": 1} {
		if got := done.get(order); got != 1 {
			t.Errorf("order %s done %d times, want 1", order, got)
		}
		if got := attempts.get(order); got != want {
			t.Errorf("order %s attempted %d times, want %d", order, got, want)
		}
	}
	if n := len(matching(logs.Records(), gateway.OutcomeFailed, ids[0])); n != 1 {
		t.Errorf("%d failed lines for order A, want 1", n)
	}
}
