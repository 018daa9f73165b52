package idemgate_test

// The README's quickstarts are copied from the Example functions in this
// file and from the whole-file examples example_*_test.go (a quickstart
// that shows its imports, init or main), and TestREADMESnippetsAreCompiled
// keeps them in step: each Go block of README.md is an exact, contiguous
// part of one Example's body or of one whole-file example, and each
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
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

// The quickstarts' business actions.
func charge(context.Context) error             { return nil }
func placeOrder(context.Context, []byte) error { return nil }

var sent = map[string]int{} // sendToWarehouse's runs, by order

func sendToWarehouse(_ context.Context, orderID string, _ []byte) error {
	sent[orderID]++
	return nil
}

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
	switch {
	case err == nil: // charged now
	case errors.Is(err, gateway.ErrDuplicate): // charged before: ack
	case errors.Is(err, gateway.ErrInProgress): // held by another caller (an *InProgressError): retry later
	default: // charge or the store failed: retry
	}
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

// TestREADMESnippetsAreCompiled holds each Go block of README.md to the
// body of one Example in this file, or to one whole-file example: the
// block's lines must appear there,
// contiguous and exact (one level of indentation removed), and every Example
// must be shown by a block. So a README edit that the compiler has not seen
// fails, and so does an Example changed without its README block.
func TestREADMESnippetsAreCompiled(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := exampleBodies(t, "readme_test.go")
	files, err := filepath.Glob("example_*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name, lines := wholeFileExample(t, f)
		examples[name] = lines
	}
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
			t.Errorf("README Go block %d is not a contiguous, exact part of any Example in readme_test.go or example_*_test.go:\n%s", i+1, strings.Join(b, "\n"))
		}
		shown[name] = true
	}
	for n := range examples {
		if !shown[n] {
			t.Errorf("%s is shown by no Go block of README.md", n)
		}
	}
}

// wholeFileExample returns the name of the one Example of the Go file at
// path, and the file's lines: as go doc does, the whole file is the
// example.
func wholeFileExample(t *testing.T, path string) (string, []string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range exampleBodies(t, path) {
		names = append(names, n)
	}
	if len(names) != 1 {
		t.Fatalf("%s has Examples %v; a whole-file example has exactly one", path, names)
	}
	return names[0], strings.Split(strings.TrimRight(string(src), "\n"), "\n")
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
