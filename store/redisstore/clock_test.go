package redisstore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

// Two processes whose clocks disagree must agree on every lease. They do
// because the store never reads the clock of the process it runs in: the
// scripts take every instant from the server's TIME, and the client sends
// only durations. A skewed host clock cannot be staged here, so the tests
// below show both halves: the code has no way to read the local clock, and
// the instants it returns come from the server.

// clockReaders are the functions of package time that read the local clock.
var clockReaders = map[string]bool{
	"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true,
	"Tick": true, "NewTimer": true, "NewTicker": true,
}

// TestNoLocalClock fails if the package's own (non-test) code calls any
// function of package time that reads the local clock.
func TestNoLocalClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		timePkg := ""
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
				timePkg = "time"
				if imp.Name != nil {
					timePkg = imp.Name.Name
				}
			}
		}
		if timePkg == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == timePkg && clockReaders[sel.Sel.Name] {
				t.Errorf("%s: time.%s reads the local clock; the store must use only the server's TIME", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files found to check")
	}
}

// TestLeaseFromServerClock checks that Won and HeldByOther carry the
// server's instants: the lease ends lease after the server's TIME at the
// moment of the claim, and an Extend moves it from the server's TIME too.
func TestLeaseFromServerClock(t *testing.T) {
	client := newClient(t)
	s := newStore(t, client, &redisstore.Options{Prefix: uniquePrefix(t)})
	ctx := t.Context()
	const lease = 90 * time.Second
	within := func(what string, got time.Time, before, after int64) {
		t.Helper()
		if ms := got.UnixMilli(); ms < before+lease.Milliseconds() || ms > after+lease.Milliseconds() {
			t.Errorf("%s LeaseUntil %d, want server TIME + lease in [%d, %d]", what, ms, before+lease.Milliseconds(), after+lease.Milliseconds())
		}
	}

	before := serverMillis(t, client)
	c, err := s.Claim(ctx, "k", lease, store.ClaimOptions{})
	after := serverMillis(t, client)
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim = %v, %v; want Won", c.Status, err)
	}
	within("Won", c.LeaseUntil, before, after)

	h, err := s.Claim(ctx, "k", lease, store.ClaimOptions{})
	if err != nil || h.Status != store.HeldByOther || !h.LeaseUntil.Equal(c.LeaseUntil) {
		t.Fatalf("Claim = %+v, %v; want HeldByOther until exactly %v", h, err, c.LeaseUntil)
	}

	before = serverMillis(t, client)
	e, err := s.Extend(ctx, c, lease)
	after = serverMillis(t, client)
	if err != nil {
		t.Fatal(err)
	}
	within("Extend", e.LeaseUntil, before, after)
}
