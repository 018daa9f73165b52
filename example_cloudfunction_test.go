package idemgate_test

import "fmt" // the Example's output; the quickstart's imports follow

import (
	"context"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

var onOrder func(context.Context, event.Event) error // what functions-framework calls

func init() {
	st, _ := memstore.New(nil) // one instance only: deploy on a shared store (docs/stores/)
	g, _ := gateway.New(st, nil)
	onOrder = cloudevent.Wrap(g, shipOrder, &cloudevent.Options{
		Key: gateway.KeyFromAttribute("order_id"), // or the event id (= messageId), the default
	})
	functions.CloudEvent("OnOrder", onOrder) // deploy with --entry-point OnOrder
}

// shipOrder is your function: it runs once per order_id; an error retries the event.
func shipOrder(ctx context.Context, e event.Event) error {
	m, _ := pushenvelope.FromContext(ctx) // the Pub/Sub message the event carries
	return sendToWarehouse(ctx, m.Attributes["order_id"], m.Data)
}

// Example_cloudFunction is the whole of a Cloud Functions gen2 package:
// functions-framework calls onOrder for each event, and a redelivery does
// not ship again.
func Example_cloudFunction() {
	e := event.New()
	e.SetID("m-1")
	e.SetSource("//pubsub.googleapis.com/projects/p/topics/orders")
	e.SetType(pushenvelope.MessagePublishedType)
	e.SetData(event.ApplicationJSON, map[string]any{"message": map[string]any{"messageId": "m-1", "attributes": map[string]string{"order_id": "o-7"}}})
	fmt.Println(onOrder(context.Background(), e), onOrder(context.Background(), e), sent["o-7"])
	// Output: <nil> <nil> 1
}
