package pull_test

import (
	"context"
	"log"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/store/memstore"
)

func main() {
	ctx := context.Background()
	client, err := pubsub.NewClient(ctx, "my-project")
	if err != nil {
		log.Fatal(err)
	}
	st, err := memstore.New(nil) // one process only: several subscribers share a store (docs/stores/)
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(st, &gateway.Options{MaxAttempts: 5}) // a message that keeps failing is given up, FAILED, after 5 runs
	if err != nil {
		log.Fatal(err)
	}
	sub := client.Subscriber("orders-sub")
	err = sub.Receive(ctx, pull.Wrap(g, ship, nil)) // acks done and duplicate, nacks the rest
	log.Fatal(err)
}

// ship is your handler: it runs once per messageId; an error nacks the message.
func ship(ctx context.Context, m *pubsub.Message) error {
	return sendToWarehouse(ctx, m.Attributes["order_id"], m.Data)
}

// This file is the whole of a pull subscriber's main package. It needs a
// Pub/Sub server, so it is compiled but not run; the package's tests run
// Wrap against the emulator.
func Example() {
	main()
}

// sendToWarehouse stands for your code.
func sendToWarehouse(context.Context, string, []byte) error { return nil }
