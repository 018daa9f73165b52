package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// docSection returns the section of docs/operations.md about example-run.
func docSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## The example service: `cmd/example-run`\n")
	if i < 0 {
		t.Fatal("docs/operations.md has no section about example-run")
	}
	rest := doc[i+1:]
	if j := strings.Index(rest[3:], "\n## "); j >= 0 {
		rest = rest[:j+3]
	}
	return rest
}

// TestDocumentedEnvironment: docs/operations.md's table of example-run's
// variables lists exactly those the service reads at start-up.
func TestDocumentedEnvironment(t *testing.T) {
	var mu sync.Mutex // guards read
	read := map[string]bool{}
	getenv := func(k string) string {
		mu.Lock()
		defer mu.Unlock()
		read[k] = true
		return map[string]string{"PORT": "0", "IDEMGATE_STORE": "memory://"}[k]
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, getenv, io.Discard, ready) }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	section := docSection(t)
	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \\|")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, v := range strings.Split(m[1], ", ") {
			documented[strings.Trim(v, "`")] = true
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k := range read {
		if !documented[k] {
			t.Errorf("example-run reads %s, which the environment table of docs/operations.md does not list", k)
		}
	}
	for k := range documented {
		if !read[k] {
			t.Errorf("docs/operations.md lists %s, which example-run does not read", k)
		}
	}
}

// TestDocumentedRoutesAndPrefixes: every route example-run serves, and
// every key prefix its code writes, is in its section of
// docs/operations.md.
func TestDocumentedRoutesAndPrefixes(t *testing.T) {
	section := docSection(t)
	routes, prefixes := routesAndPrefixes(t)
	if len(routes) < 7 || len(prefixes) < 6 {
		t.Fatalf("found routes %q and prefixes %q in the code; the scan matched too little", routes, prefixes)
	}
	t.Logf("routes %q, prefixes %q", routes, prefixes)
	for _, r := range routes {
		if !strings.Contains(section, "| `"+r+"` |") {
			t.Errorf("the route %s is not in the route table of docs/operations.md", r)
		}
	}
	for _, p := range prefixes {
		if !strings.Contains(section, "`"+p) {
			t.Errorf("the key prefix %s is not in the route table of docs/operations.md", p)
		}
	}
}

// routesAndPrefixes scans example-run's code for the patterns it serves
// (the first argument of Handle and HandleFunc, with a method) and the key prefixes it
// writes (string literals such as "msg:"), and the attribute names it keys
// on (KeyFromAttribute's argument, which becomes the prefix "name:").
func routesAndPrefixes(t *testing.T) (routes, prefixes []string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	prefix := regexp.MustCompile(`^[a-z][a-z_-]*:$`)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || len(n.Args) == 0 {
					return true
				}
				lit, ok := n.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				v, _ := strconv.Unquote(lit.Value)
				switch sel.Sel.Name {
				case "Handle", "HandleFunc":
					if strings.Contains(v, " ") { // "POST /orders"; "/" hands the rest to another mux
						routes = append(routes, v)
					}
				case "KeyFromAttribute":
					prefixes = append(prefixes, v+":")
				}
			case *ast.BasicLit:
				if v, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && prefix.MatchString(v) {
					prefixes = append(prefixes, v)
				}
			}
			return true
		})
	}
	slices.Sort(routes)
	slices.Sort(prefixes)
	return slices.Compact(routes), slices.Compact(prefixes)
}
