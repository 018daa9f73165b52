package relay_test

import (
	"context"
	"log"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// The relay publishes what the stages commit to the outbox; the next
// stage keys on the child key, so a message published twice (a relay that
// died before marking it sent) runs once.
func Example() {
	ctx := context.Background()
	var s *sqlstore.Store // the stage's store, built with Options{Outbox: true}
	var g *gateway.Gateway

	client, err := pubsub.NewClient(ctx, "my-project")
	if err != nil {
		log.Fatal(err)
	}
	r, err := relay.New(s.Outbox(), client, nil)
	if err != nil {
		log.Fatal(err)
	}
	go r.Run(ctx) // or the command: idemgate relay -store URL -project my-project

	// The next stage, downstream of the "shipments" topic:
	shipments := g.Route(&gateway.RouteOptions{Key: gateway.KeyFromChildKey})
	_ = shipments
}
