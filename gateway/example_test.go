package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

func ExampleGateway_Lock() {
	st, _ := memstore.New(nil) // or redisstore, sqlstore, datastorestore…
	g, err := gateway.New(st, nil)
	if err != nil {
		log.Fatal(err)
	}
	charge := func(ctx context.Context) error {
		fmt.Println("card charged")
		return nil
	}
	for range 2 { // the same message, delivered twice
		err := g.Lock(context.Background(), "payment-42", charge)
		switch {
		case errors.Is(err, gateway.ErrDuplicate):
			fmt.Println("duplicate: ack")
		case errors.Is(err, gateway.ErrInProgress):
			fmt.Println("held elsewhere: nack, retry later")
		case err != nil:
			fmt.Println("failed: nack:", err)
		default:
			fmt.Println("done: ack")
		}
	}
	// Output:
	// card charged
	// done: ack
	// duplicate: ack
}

func ExampleGateway_Mutex() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	for _, status := range []string{"shipped", "delivered"} {
		// Every update of PO 7 runs, one at a time across all instances.
		err := g.Mutex(context.Background(), "po:7", func(ctx context.Context) error {
			fmt.Println("po 7 is", status)
			return nil
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// po 7 is shipped
	// po 7 is delivered
}

func ExampleGateway_Push() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, &gateway.Options{
		Key: gateway.KeyFromAttribute("order_id"), // dedupe republished orders too
	})
	http.Handle("POST /orders", g.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		return placeOrder(ctx, m.Data) // an error nacks; Pub/Sub retries
	}))
	// log.Fatal(http.ListenAndServe(":8080", nil))
}

func ExampleClaimFromContext() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	g.Lock(context.Background(), "order-9", func(ctx context.Context) error {
		c, _ := gateway.ClaimFromContext(ctx)
		// Hand the fence to a sink that refuses writes from older fences.
		fmt.Printf("write %s with fence %d\n", c.Key, c.Fence)
		return nil
	})
	// Output: write order-9 with fence 1
}

func placeOrder(context.Context, []byte) error { return nil }
