package cloudevent_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

// In a function package the wrapped function is registered in init, with
// functions.CloudEvent("OnOrder", onOrder). Here it is called directly,
// the way functions-framework calls it, with the same event twice.
func ExampleWrap() {
	st, err := memstore.New(nil) // in production: a store shared by every instance
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(st, &gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	onOrder := cloudevent.Wrap(g, func(ctx context.Context, e event.Event) error {
		m, _ := pushenvelope.FromContext(ctx)
		fmt.Printf("shipping order %s: %s\n", m.Attributes["order_id"], m.Data)
		return nil
	}, &cloudevent.Options{Logger: slog.New(slog.DiscardHandler)})

	e := event.New()
	e.SetID("1234567890") // the Pub/Sub messageId
	e.SetType(pushenvelope.MessagePublishedType)
	e.SetSource("//pubsub.googleapis.com/projects/acme/topics/orders")
	_ = e.SetData(event.ApplicationJSON, map[string]any{
		"message": map[string]any{
			"messageId":  "1234567890",
			"data":       "eyJza3UiOiJBLTEifQ==", // {"sku":"A-1"}
			"attributes": map[string]string{"order_id": "o-42"},
		},
		"subscription": "projects/acme/subscriptions/eventarc-orders",
	})

	fmt.Println("first delivery:", onOrder(context.Background(), e))
	fmt.Println("redelivery:", onOrder(context.Background(), e))
	// Output:
	// shipping order o-42: {"sku":"A-1"}
	// first delivery: <nil>
	// redelivery: <nil>
}

// KeyFromAttribute keys on a business attribute, so that a producer that
// publishes the same order twice ships it once.
func ExampleKeyFromAttribute() {
	g, err := gateway.New(must(memstore.New(nil)), &gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	onOrder := cloudevent.Wrap(g, func(ctx context.Context, e event.Event) error {
		c, _ := gateway.ClaimFromContext(ctx)
		fmt.Println("shipping under key", c.Key)
		return nil
	}, &cloudevent.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}, Logger: slog.New(slog.DiscardHandler)})

	for _, id := range []string{"111", "222"} { // two publishes of one order
		e := event.New()
		e.SetID(id)
		e.SetType(pushenvelope.MessagePublishedType)
		e.SetSource("//pubsub.googleapis.com/projects/acme/topics/orders")
		_ = e.SetData(event.ApplicationJSON, map[string]any{
			"message": map[string]any{"messageId": id, "attributes": map[string]string{"order_id": "o-42"}},
		})
		fmt.Println(id, onOrder(context.Background(), e))
	}
	// Output:
	// shipping under key order_id:o-42
	// 111 <nil>
	// 222 <nil>
}

// The default key: a Pub/Sub event's messageId, and the source and id of
// any other event, whose id is unique for its source only.
func ExampleKeyFromEvent() {
	g, err := gateway.New(must(memstore.New(nil)), &gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	onUpload := cloudevent.Wrap(g, func(ctx context.Context, e event.Event) error {
		c, _ := gateway.ClaimFromContext(ctx)
		fmt.Println("indexing under key", c.Key)
		return nil
	}, &cloudevent.Options{Logger: slog.New(slog.DiscardHandler)})

	for _, bucket := range []string{"invoices", "receipts", "invoices"} {
		e := event.New()
		e.SetID("1042")
		e.SetType("google.cloud.storage.object.v1.finalized")
		e.SetSource("//storage.googleapis.com/projects/_/buckets/" + bucket)
		fmt.Println(bucket, onUpload(context.Background(), e))
	}
	// Output:
	// indexing under key 52://storage.googleapis.com/projects/_/buckets/invoices:1042
	// invoices <nil>
	// indexing under key 52://storage.googleapis.com/projects/_/buckets/receipts:1042
	// receipts <nil>
	// invoices <nil>
}
