package idemgate_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemoQuotesRealLogLines holds the lines `make demo` tells its reader
// to look for in bin/demo.log to the log messages of the code that writes
// that log (gateway and the examples' action): a renamed message fails here
// rather than sending the reader after a line that never comes.
func TestDemoQuotesRealLogLines(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var quoted []string
	for l := range strings.Lines(string(mk)) {
		if !strings.Contains(l, "@echo") {
			continue
		}
		for _, m := range regexp.MustCompile(`\\"([a-z][a-z ]+)\\"`).FindAllStringSubmatch(l, -1) {
			quoted = append(quoted, m[1])
		}
	}
	if len(quoted) < 3 {
		t.Fatalf("Makefile's demo quotes %d log lines (%q); want the ones it points the reader to", len(quoted), quoted)
	}
	var code strings.Builder
	for _, dir := range []string{"gateway", "internal/example"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			code.Write(src)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range quoted {
		if !strings.Contains(code.String(), q) {
			t.Errorf("make demo points to log lines %q, which gateway/ and internal/example/ never write", q)
		}
	}
}
