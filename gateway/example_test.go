package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

// The README's first quickstart: build a Gateway on a store, then run an
// action at most once for its key and map each outcome to ack or retry.
func ExampleGateway_Lock() {
	ctx := context.Background()
	st, err := memstore.New(nil) // or redisstore, sqlstore, datastorestore…
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(st, nil)
	if err != nil {
		log.Fatal(err)
	}

	err = g.Lock(ctx, "payment-42", func(ctx context.Context) error {
		return charge(ctx) // runs at most once for "payment-42"
	})
	switch {
	case err == nil: // charged now
	case errors.Is(err, gateway.ErrDuplicate): // charged before: ack
	case errors.Is(err, gateway.ErrInProgress): // held by another caller (an *InProgressError): retry later
	default: // charge or the store failed: retry
	}

	// The same payment again, as a redelivery would ask: not charged twice.
	again := g.Lock(ctx, "payment-42", charge)
	fmt.Println(err, errors.Is(again, gateway.ErrDuplicate))
	// Output:
	// card charged
	// <nil> true
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

// The README's Cloud Run quickstart: one route of a Gateway, keyed on a
// business attribute, so that a republished order is placed once.
func ExampleGateway_Push() {
	st, err := memstore.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(st, nil) // one Gateway for every route
	if err != nil {
		log.Fatal(err)
	}

	orders := g.Route(&gateway.RouteOptions{
		Key: gateway.KeyFromAttribute("order_id"), // dedupe republished orders too
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", orders.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		return placeOrder(ctx, m.Data) // an error nacks; Pub/Sub retries
	}))
	// log.Fatal(http.ListenAndServe(":"+os.Getenv("PORT"), mux))

	// The same order, published twice: the second answers 204 (ack) unrun.
	for _, id := range []string{"m-1", "m-2"} {
		body := `{"message":{"messageId":"` + id + `","attributes":{"order_id":"o-7"}},"subscription":"s"}`
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body)))
		fmt.Println(id, rec.Code)
	}
	// Output:
	// m-1 200
	// m-2 204
}

func ExampleGateway_Idempotent() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		m, _ := pushenvelope.FromContext(r.Context())
		fmt.Printf("order %s placed\n", m.Data)
	})
	srv := httptest.NewServer(g.Idempotent(mux)) // the whole mux; health checks pass through
	defer srv.Close()

	health, _ := srv.Client().Get(srv.URL + "/healthz")
	health.Body.Close()
	fmt.Println("GET /healthz:", health.StatusCode)
	push := `{"message":{"messageId":"m-1","data":"NDI="},"subscription":"projects/p/subscriptions/orders"}`
	for range 2 { // Pub/Sub delivers the message twice
		resp, _ := srv.Client().Post(srv.URL+"/", "application/json", strings.NewReader(push))
		resp.Body.Close()
		fmt.Println("POST /:", resp.StatusCode)
	}
	// Output:
	// GET /healthz: 200
	// order 42 placed
	// POST /: 200
	// POST /: 204
}

func ExampleGateway_Route() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil) // one Gateway for every route
	orders := g.Route(&gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")})
	place := func(ctx context.Context, m *pushenvelope.Message) error {
		fmt.Println("placing order", m.Attributes["order_id"], "from message", m.ID)
		return nil
	}
	h := orders.Push(place)
	for _, id := range []string{"m-1", "m-2"} { // a producer republished order 7
		body := `{"message":{"messageId":"` + id + `","attributes":{"order_id":"7"}}}`
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body)))
		fmt.Println(id, "answered", rec.Code)
	}
	// Output:
	// placing order 7 from message m-1
	// m-1 answered 200
	// m-2 answered 204
}

// A poison message: the order's customer is gone, so no retry can help.
// The handler says so with Permanent (a budget, MaxAttempts, would stop
// other failures after that many attempts); the key's record goes FAILED,
// and its redeliveries answer 422 without running the handler, on their
// way to the dead-letter topic.
func ExamplePermanent() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, &gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	orders := g.Route(&gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), MaxAttempts: 5})
	h := orders.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		fmt.Println("placing order", m.Attributes["order_id"])
		return gateway.Permanent(errors.New("customer 17 no longer exists"))
	})
	for range 2 { // the first delivery, and Pub/Sub's redelivery
		body := `{"message":{"messageId":"m-1","attributes":{"order_id":"7"}}}`
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body)))
		fmt.Println("answered", rec.Code)
	}
	r, _, _ := st.Inspect(context.Background(), "order_id:7")
	fmt.Println(r.State, r.Attempts, r.Reason)
	// Output:
	// placing order 7
	// answered 422
	// answered 422
	// FAILED 1 customer 17 no longer exists
}

func ExampleClaimFromContext() {
	// A fixed clock, so that the fence (the store's clock in microseconds
	// when the record was made) is the same on every run.
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	st, _ := memstore.New(&memstore.Options{Now: func() time.Time { return at }})
	g, _ := gateway.New(st, nil)
	g.Lock(context.Background(), "order-9", func(ctx context.Context) error {
		c, _ := gateway.ClaimFromContext(ctx)
		// Hand the fence to a sink that refuses writes from older fences.
		fmt.Printf("write %s with fence %d\n", c.Key, c.Fence)
		return nil
	})
	// Output: write order-9 with fence 1893499200000000
}

// The quickstarts' business actions.
func placeOrder(context.Context, []byte) error { return nil }

func charge(context.Context) error {
	fmt.Println("card charged")
	return nil
}
