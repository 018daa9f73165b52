package idemgate_test

// The README's quickstarts are copied from Example functions of the
// packages a reader lands on (gateway, cloudevent, pull, sqlstore, relay),
// and TestREADMESnippetsAreCompiled keeps them in step: each Go block of
// README.md is an exact, contiguous part of one Example's body, or of a
// whole-file example (a quickstart that shows its imports, init or main),
// and each quickstart Example is shown by a block.

import (
	"bufio"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// readmeSources are the files whose Examples README blocks may copy.
var readmeSources = []string{
	"gateway/example_test.go",
	"cloudevent/example_function_test.go",
	"pull/example_subscriber_test.go",
	"store/sqlstore/example_test.go",
	"store/sqlstore/example_outbox_test.go",
	"store/sqlstore/example_quickstart_test.go",
	"relay/example_test.go",
}

// quickstarts are the Examples that exist for the README: each must be
// shown by one of its blocks, so that neither drifts from the other.
var quickstarts = []string{
	"gateway/example_test.go:ExampleGateway_Lock",
	"gateway/example_test.go:ExampleGateway_Push",
	"cloudevent/example_function_test.go:Example",
	"pull/example_subscriber_test.go:Example",
	"store/sqlstore/example_quickstart_test.go:Example",
}

// TestREADMESnippetsAreCompiled holds each Go block of README.md to one
// Example of readmeSources: the block's lines must appear in the Example's
// body (one level of indentation removed) or, for a whole-file example, in
// the file, contiguous and exact. A whole file's package clause is the one
// line that may differ: the README names the reader's package (package
// orders, package main), the file its test package. So a README edit that
// the compiler has not seen fails, and so does a quickstart Example changed
// without its README block.
func TestREADMESnippetsAreCompiled(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := map[string][][]string{}
	for _, f := range readmeSources {
		for name, views := range exampleLines(t, f) {
			examples[f+":"+name] = views
		}
	}
	for _, q := range quickstarts {
		if len(examples[q]) == 0 {
			t.Fatalf("quickstart %s: no such Example in readmeSources", q)
		}
	}
	blocks := goBlocks(string(readme))
	if len(blocks) < len(quickstarts) {
		t.Fatalf("README has %d Go blocks; want at least the %d quickstarts", len(blocks), len(quickstarts))
	}
	shown := map[string]bool{}
	for i, b := range blocks {
		name := ""
		for n, views := range examples {
			if slices.ContainsFunc(views, func(lines []string) bool { return contains(lines, b) }) {
				name = n
				break
			}
		}
		if name == "" {
			t.Errorf("README Go block %d is not a contiguous, exact part of any Example in %s:\n%s",
				i+1, strings.Join(readmeSources, ", "), strings.Join(b, "\n"))
		}
		shown[name] = true
	}
	for _, q := range quickstarts {
		if !shown[q] {
			t.Errorf("quickstart %s is shown by no Go block of README.md", q)
		}
	}
}

// exampleLines returns the lines of each Example of the Go file at path,
// keyed by function name: its body's, one tab of indentation removed, and
// for a whole-file example (as go doc shows it) the file's too, its
// package clause reduced to "package".
func exampleLines(t *testing.T, path string) map[string][][]string {
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
	bodies := map[string]*ast.BlockStmt{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
			bodies[fd.Name.Name] = fd.Body
		}
	}
	views := map[string][][]string{}
	for _, ex := range doc.Examples(f) {
		name := "Example" + ex.Name // go/doc's Name is what follows "Example"
		body := bodies[name]
		inner := src[fset.Position(body.Lbrace).Offset+1 : fset.Position(body.Rbrace).Offset]
		var lines []string
		for l := range strings.Lines(strings.Trim(string(inner), "\n")) {
			lines = append(lines, strings.TrimPrefix(strings.TrimRight(l, "\n"), "\t"))
		}
		views[name] = [][]string{lines}
		if _, whole := ex.Code.(*ast.File); whole {
			file := strings.Split(strings.TrimRight(string(src), "\n"), "\n")
			views[name] = append(views[name], packageClause(file))
		}
	}
	return views
}

// packageClause returns lines with their package clause, if any, reduced
// to the word "package", which any other package clause matches.
func packageClause(lines []string) []string {
	out := slices.Clone(lines)
	for i, l := range out {
		if strings.HasPrefix(l, "package ") {
			out[i] = "package"
			break
		}
	}
	return out
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
			blocks = append(blocks, packageClause(cur))
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
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
