package idemgate_test

// The README's quickstarts are copied from the Example functions in this
// file, and TestREADMESnippetsAreCompiled keeps them in step: each Go block
// of README.md is an exact, contiguous part of one Example's body, and each
// Example is shown by a block.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
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

func charge(context.Context) error             { return nil }
func placeOrder(context.Context, []byte) error { return nil }

var shipped int // shipOrder's runs

func shipOrder(context.Context, event.Event) error { shipped++; return nil }
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
	mux := http.NewServeMux()
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil) // one Gateway for every route
	orders := g.Route(gateway.RouteOptions{
		Key: gateway.KeyFromAttribute("order_id"), // dedupe republished orders too
	})
	mux.Handle("POST /orders", orders.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		return placeOrder(ctx, m.Data) // an error nacks; Pub/Sub retries
	}))

	// The same order, published twice: the second answers 204 (ack) unrun.
	for _, id := range []string{"m-1", "m-2"} {
		body := `{"message": {"messageId": "` + id + `", "attributes": {"order_id": "o-7"}}, "subscription": "s"}`
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body)))
		fmt.Print(rec.Code, " ")
	}
	// Output: 200 204
}

func Example_cloudFunction() {
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	// In your function package's init:
	onOrder := cloudevent.Wrap(g, shipOrder, &cloudevent.Options{
		Key: gateway.KeyFromAttribute("order_id"), // or the event id (= messageId), the default
	})
	functions.CloudEvent("OnOrder", onOrder)

	// functions-framework calls it for each event; a redelivery does not ship again.
	e := event.New()
	e.SetID("m-1")
	e.SetSource("//pubsub.googleapis.com/projects/p/topics/orders")
	e.SetType(pushenvelope.MessagePublishedType)
	e.SetData(event.ApplicationJSON, map[string]any{"message": map[string]any{"messageId": "m-1", "attributes": map[string]string{"order_id": "o-7"}}})
	fmt.Println(onOrder(context.Background(), e), onOrder(context.Background(), e), shipped)
	// Output: <nil> <nil> 1
}

// Example_pull needs a Pub/Sub server, so it is compiled but not run;
// pull's tests run the same code against the emulator.
func Example_pull() {
	ctx := context.Background()
	client, _ := pubsub.NewClient(ctx, "my-project")
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	sub := client.Subscriber("orders-sub")
	err := sub.Receive(ctx, pull.Wrap(g, ship, nil)) // acks done and duplicate, nacks the rest
	_ = err
}

// TestREADMESnippetsAreCompiled holds each Go block of README.md to the
// body of one Example in this file: the block's lines must appear there,
// contiguous and exact (one level of indentation removed), and every Example
// must be shown by a block. So a README edit that the compiler has not seen
// fails, and so does an Example changed without its README block.
func TestREADMESnippetsAreCompiled(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := exampleBodies(t, "readme_test.go")
	// A store's own feature is shown from that package's Example.
	all := maps.Clone(examples)
	maps.Copy(all, exampleBodies(t, "store/sqlstore/example_test.go"))
	maps.Copy(all, exampleBodies(t, "store/sqlstore/example_outbox_test.go"))
	maps.Copy(all, exampleBodies(t, "relay/example_test.go"))
	blocks := goBlocks(string(readme))
	if len(blocks) < 4 {
		t.Fatalf("README has %d Go blocks; want the four quickstarts", len(blocks))
	}
	shown := map[string]bool{}
	for i, b := range blocks {
		name := ""
		for n, body := range all {
			if contains(body, b) {
				name = n
				break
			}
		}
		if name == "" {
			t.Errorf("README Go block %d is not a contiguous, exact part of any Example in readme_test.go:\n%s", i+1, strings.Join(b, "\n"))
		}
		shown[name] = true
	}
	for n := range examples {
		if !shown[n] {
			t.Errorf("%s is shown by no Go block of README.md", n)
		}
	}
}

// goBlocks returns the lines of each ```go block of a Markdown text.
func goBlocks(md string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```go"):
			in, cur = true, nil
		case in && strings.HasPrefix(l, "```"):
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
}

// exampleBodies returns the lines of the body of each Example function in
// the Go file at path, one tab of indentation removed.
func exampleBodies(t *testing.T, path string) map[string][]string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]string{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fd.Name.Name, "Example") {
			continue
		}
		inner := src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset]
		var lines []string
		for l := range strings.Lines(strings.Trim(string(inner), "\n")) {
			lines = append(lines, strings.TrimPrefix(strings.TrimRight(l, "\n"), "\t"))
		}
		bodies[fd.Name.Name] = lines
	}
	return bodies
}

// contains reports whether part appears in whole as a contiguous run.
func contains(whole, part []string) bool {
	for i := 0; i+len(part) <= len(whole); i++ {
		if slices.Equal(whole[i:i+len(part)], part) {
			return true
		}
	}
	return false
}
