package pull_test

import (
	"context"
	"log"
	"log/slog"
	"os/signal"
	"syscall"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/store/memstore"
)

// A pull subscriber whose side effect runs once per order, however often
// Pub/Sub delivers the message and however often the producer republishes
// it. Several instances share one store (redisstore, sqlstore, …); memstore
// is enough for a single process. It needs a Pub/Sub server, so it is
// compiled but not run; the package's tests run Wrap against the emulator.
func ExampleWrap() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()

	client, err := pubsub.NewClient(ctx, "my-project") // honours PUBSUB_EMULATOR_HOST
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	st, err := memstore.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(st, nil)
	if err != nil {
		log.Fatal(err)
	}

	sub := client.Subscriber("orders-sub")
	// Flow control bounds the messages in flight, including those held
	// while another delivery of the same key is being processed.
	sub.ReceiveSettings.MaxOutstandingMessages = 100

	ship := func(ctx context.Context, m *pubsub.Message) error {
		// Send the key along, so the sink can absorb the one repeat no lock
		// prevents (a crash after the side effect, before it is recorded).
		c, _ := gateway.ClaimFromContext(ctx)
		slog.InfoContext(ctx, "shipping", "order", m.Attributes["order_id"], "idempotency_key", c.Key)
		return nil // an error nacks the message: it is delivered again
	}
	err = sub.Receive(ctx, pull.Wrap(g, ship, &pull.Options{
		Route:        gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")},
		Subscription: sub.String(),
	}))
	if err != nil {
		log.Fatal(err)
	}
}
