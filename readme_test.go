package idemgate_test

// The README's quickstarts are copied from the Example functions in this
// file, and TestREADMESnippetsAreCompiled keeps them in step: every line of
// every Go block in README.md must appear, in order, in this file.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

func charge(context.Context) error                 { return nil }
func placeOrder(context.Context, []byte) error     { return nil }
func shipOrder(context.Context, event.Event) error { return nil }
func ship(context.Context, *pubsub.Message) error  { return nil }

func Example_lock() {
	ctx := context.Background()
	st, _ := memstore.New(nil) // or redisstore, sqlstore, datastorestore…
	g, err := gateway.New(st, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = g.Lock(ctx, "payment-42", func(ctx context.Context) error {
		return charge(ctx) // runs at most once for "payment-42"
	})
	// nil: done · gateway.ErrDuplicate: done before (ack) · gateway.ErrInProgress: retry later
	fmt.Println(err, errors.Is(g.Lock(ctx, "payment-42", charge), gateway.ErrDuplicate))
	// Output: <nil> true
}

func Example_push() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil) // one Gateway for every route
	orders := g.Route(gateway.RouteOptions{
		Key: gateway.KeyFromAttribute("order_id"), // dedupe republished orders too
	})
	http.Handle("POST /orders", orders.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		return placeOrder(ctx, m.Data) // an error nacks; Pub/Sub retries
	}))
}

func Example_cloudFunction() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	// In your function package's init:
	functions.CloudEvent("OnOrder", cloudevent.Wrap(g, shipOrder, &cloudevent.Options{
		Key: gateway.KeyFromAttribute("order_id"), // or the event id (= messageId), the default
	}))
}

func Example_pull() {
	ctx := context.Background()
	client, _ := pubsub.NewClient(ctx, "my-project")
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	sub := client.Subscriber("orders-sub")
	err := sub.Receive(ctx, pull.Wrap(g, ship, nil)) // acks done and duplicate, nacks the rest
	_ = err
}

func TestREADMESnippetsAreCompiled(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for l := range strings.Lines(string(src)) {
		lines = append(lines, strings.TrimSpace(l))
	}
	in, block, n := false, 0, 0
	sc := bufio.NewScanner(strings.NewReader(string(readme)))
	pos := 0
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```go"):
			in, block, pos = true, block+1, 0
			continue
		case in && strings.HasPrefix(l, "```"):
			in = false
			continue
		case !in || strings.TrimSpace(l) == "":
			continue
		}
		want := strings.TrimSpace(l)
		found := false
		for ; pos < len(lines); pos++ {
			if lines[pos] == want {
				found, pos = true, pos+1
				break
			}
		}
		if !found {
			t.Errorf("README Go block %d: line %q is not in an Example of readme_test.go (in order)", block, want)
			pos = 0
		}
		n++
	}
	if block < 4 || n == 0 {
		t.Fatalf("README has %d Go blocks (%d lines); want the four quickstarts", block, n)
	}
}
