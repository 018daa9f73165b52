package cloudevent_test

import (
	"context"
	"fmt"
	"log"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

var onOrder func(context.Context, event.Event) error // what functions-framework calls

func init() {
	st, err := memstore.New(nil) // one instance only: deploy on a shared store (docs/stores/)
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(st, nil)
	if err != nil {
		log.Fatal(err)
	}
	onOrder = cloudevent.Wrap(g, shipOrder, &cloudevent.Options{
		Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}, // or the event id (= messageId), the default
	})
	functions.CloudEvent("OnOrder", onOrder) // deploy: --entry-point OnOrder; locally: FUNCTION_TARGET=OnOrder
}

// shipOrder is your function: it runs once per order_id; an error retries the event.
func shipOrder(ctx context.Context, e event.Event) error {
	m, ok := pushenvelope.FromContext(ctx) // the Pub/Sub message the event carries
	if !ok {
		return fmt.Errorf("event %s is not a Pub/Sub message", e.ID())
	}
	return sendToWarehouse(ctx, m.Attributes["order_id"], m.Data)
}

// This file is the whole of a Cloud Functions gen2 function package:
// functions-framework calls onOrder for each event, as here, and a
// redelivery does not ship the order again.
func Example() {
	e := event.New()
	e.SetID("m-1")
	e.SetSource("//pubsub.googleapis.com/projects/p/topics/orders")
	e.SetType(pushenvelope.MessagePublishedType)
	e.SetData(event.ApplicationJSON, map[string]any{"message": map[string]any{"messageId": "m-1", "attributes": map[string]string{"order_id": "o-7"}}})
	fmt.Println(onOrder(context.Background(), e), onOrder(context.Background(), e))
	// Output:
	// shipping order o-7
	// <nil> <nil>
}

// sendToWarehouse stands for your code.
func sendToWarehouse(_ context.Context, orderID string, _ []byte) error {
	fmt.Println("shipping order", orderID)
	return nil
}
