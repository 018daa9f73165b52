package idemgate_test

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
	st, _ := memstore.New(nil) // one process only: several subscribers share a store (docs/stores/)
	g, _ := gateway.New(st, nil)
	sub := client.Subscriber("orders-sub")
	err = sub.Receive(ctx, pull.Wrap(g, ship, nil)) // acks done and duplicate, nacks the rest
	log.Fatal(err)
}

// ship is your handler: it runs once per messageId; an error nacks the message.
func ship(ctx context.Context, m *pubsub.Message) error {
	return sendToWarehouse(ctx, m.Attributes["order_id"], m.Data)
}

// Example_pull is the whole of a pull subscriber's main package. It needs
// a Pub/Sub server, so it is compiled but not run; pull's tests run the
// same code against the emulator.
func Example_pull() {
	main()
}
