package idemgate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocsQuoteRealLogMessages holds every log message the docs quote to
// the code, so that an operator who searches the logs for one finds it.
// The convention, for docs/*.md: a log message is quoted in backticks
//
//   - in the "message" column of a table,
//   - anywhere, when it starts with "idemgate: " (the gateway's prefix), or
//   - right after the word "logs" or "logged" ("the first logs `order sent
//     to supplier`").
//
// Each must be in a string literal of the module's non-test Go code: a part
// of one literal, or the whole of a message built from pieces (a
// concatenation, or a format string), whose other parts match anything.
// "…" in a quote stands for text left out.
func TestDocsQuoteRealLogMessages(t *testing.T) {
	code := loadMessages(t, ".")
	docs, err := filepath.Glob("docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	n := 0
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range quotedMessages(string(b)) {
			n++
			if !code.has(q.text) {
				t.Errorf("%s:%d quotes the log message %q, which no string in the code holds", path, q.line, q.text)
			}
		}
	}
	if n < 30 {
		t.Errorf("found %d quoted messages in docs/*.md; the convention matched too little (operations.md alone has more)", n)
	}
}

// TestQuotedMessagesConvention checks the extraction on a sample: what it
// takes for a message, what it leaves, and that a nonexistent message fails.
func TestQuotedMessagesConvention(t *testing.T) {
	doc := "| level | message | outcome |\n|---|---|---|\n| WARN | `idemgate: no such line` | `x y` |\n\n" +
		"The run logs `order sent to supplier`, and `idemgate: release failed; the key\nfrees …` too;\n" +
		"`LOG_LEVEL=debug` and the `held` status are not messages.\n```\nlog.Info(`idemgate: in code`)\n```\n"
	var got []string
	for _, q := range quotedMessages(doc) {
		got = append(got, q.text)
	}
	want := []string{"idemgate: no such line", "idemgate: release failed; the key frees …", "order sent to supplier"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("quotedMessages = %q, want %q", got, want)
	}
	code := loadMessages(t, ".")
	for msg, want := range map[string]bool{
		"idemgate: no such line":                         false,
		"order sent to supplier":                         true,
		"idemgate: release failed; the key frees …":      true,
		"idemgate: OnDuplicate hook panicked; ignored":   true, // built by concatenation
		"idemgate: OnDuplicate hook exploded; ignored":   false,
		"idemgate: ack failed; Pub/Sub will redeliver …": true,
	} {
		if code.has(msg) != want {
			t.Errorf("has(%q) = %v, want %v", msg, !want, want)
		}
	}
}

// quote is a message quoted in a doc, and its line.
type quote struct {
	text string
	line int
}

var (
	backtick   = regexp.MustCompile("`([^`]+)`")
	afterLogs  = regexp.MustCompile("\\blog(?:s|ged) `([^`]+)`")
	tableSplit = regexp.MustCompile(`\s*\|\s*`)
)

// quotedMessages returns the messages doc quotes, by the convention of
// TestDocsQuoteRealLogMessages.
func quotedMessages(doc string) []quote {
	var (
		out    []quote
		header []string // the header row of the table being read
		column = -1     // its message column, -1 if none, -2 before its rule is read
	)
	for i, line := range logicalLines(doc) {
		if line == "" {
			continue
		}
		seen := map[string]bool{}
		add := func(s string) {
			if !seen[s] {
				seen[s] = true
				out = append(out, quote{s, i + 1})
			}
		}
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "|") {
			cells := tableSplit.Split(strings.Trim(trimmed, "|"), -1)
			switch {
			case column == -2: // the header was read; this is the rule under it
				column = -1
				for j, c := range header {
					if strings.EqualFold(c, "message") {
						column = j
					}
				}
				continue
			case header == nil:
				header, column = cells, -2
				continue
			case column >= 0 && column < len(cells):
				for _, m := range backtick.FindAllStringSubmatch(cells[column], -1) {
					add(m[1])
				}
			}
		} else {
			header, column = nil, -1
		}
		for _, m := range backtick.FindAllStringSubmatch(line, -1) {
			if strings.HasPrefix(m[1], "idemgate: ") {
				add(m[1])
			}
		}
		for _, m := range afterLogs.FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
	}
	return out
}

// logicalLines splits doc into lines, one per line of doc, with a backtick
// span that goes on to the next lines joined onto its first (the lines it
// took are left empty) and the lines of code blocks left empty: a quote may
// wrap, and code is no quote.
func logicalLines(doc string) []string {
	lines := strings.Split(doc, "\n")
	code := false
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
			code = !code
			lines[i] = ""
			continue
		}
		if code {
			lines[i] = ""
			continue
		}
		for j := i + 1; strings.Count(lines[i], "`")%2 == 1 && j < len(lines) && strings.TrimSpace(lines[j]) != ""; j++ {
			lines[i] += " " + strings.TrimSpace(lines[j])
			lines[j] = ""
		}
	}
	return lines
}

// messages are the strings of the code: its literals, and patterns of the
// messages it builds from pieces.
type messages struct {
	literals []string
	built    []*regexp.Regexp
}

// verb is a fmt verb in a format string.
var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)

// loadMessages reads every string literal of the non-test Go files under
// root, and a pattern for each concatenation and format string.
func loadMessages(t *testing.T, root string) *messages {
	t.Helper()
	ms := &messages{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, ok := literal(n); ok {
					ms.literals = append(ms.literals, s)
					if verb.MatchString(s) {
						ms.add([]string{s}, nil)
					}
				}
			case *ast.BinaryExpr:
				if n.Op == token.ADD {
					var parts []string
					var holes []bool
					flatten(n, &parts, &holes)
					ms.add(parts, holes)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// add keeps the pattern of a message built from parts, unless its own text
// is too short to tell it from another: "idemgate: " + anything.
func (ms *messages) add(parts []string, holes []bool) {
	text := verb.ReplaceAllString(strings.Join(parts, ""), "")
	if len(strings.TrimPrefix(text, "idemgate: ")) < 10 {
		return
	}
	ms.built = append(ms.built, pattern(parts, holes))
}

// literal is the value of a string literal.
func literal(n *ast.BasicLit) (string, bool) {
	if n.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(n.Value)
	return s, err == nil
}

// flatten lists the operands of a chain of +, a hole for each that is not a
// string literal.
func flatten(e ast.Expr, parts *[]string, holes *[]bool) {
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.ADD {
		flatten(b.X, parts, holes)
		flatten(b.Y, parts, holes)
		return
	}
	if lit, ok := e.(*ast.BasicLit); ok {
		if s, ok := literal(lit); ok {
			*parts, *holes = append(*parts, s), append(*holes, false)
			return
		}
	}
	*parts, *holes = append(*parts, ""), append(*holes, true)
}

// pattern is the regexp of a message built from parts: holes and fmt verbs
// match anything.
func pattern(parts []string, holes []bool) *regexp.Regexp {
	var b strings.Builder
	for i, p := range parts {
		if holes != nil && holes[i] {
			b.WriteString(".*")
			continue
		}
		last := 0
		for _, loc := range verb.FindAllStringIndex(p, -1) {
			b.WriteString(regexp.QuoteMeta(p[last:loc[0]]) + ".*")
			last = loc[1]
		}
		b.WriteString(regexp.QuoteMeta(p[last:]))
	}
	return regexp.MustCompile(`^(?s:` + b.String() + `)$`)
}

// has reports whether the code holds msg: each of its pieces between "…"
// in one literal, in order; or, without "…", the whole of a built message.
func (ms *messages) has(msg string) bool {
	pieces := strings.Split(msg, "…")
	for _, lit := range ms.literals {
		if inOrder(lit, pieces) {
			return true
		}
	}
	if len(pieces) > 1 {
		return false
	}
	for _, re := range ms.built {
		if re.MatchString(msg) {
			return true
		}
	}
	return false
}

// inOrder reports whether s holds each piece, trimmed, after the one before.
func inOrder(s string, pieces []string) bool {
	for _, p := range pieces {
		p = strings.TrimSpace(p)
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}
