package idemgate_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTwoHouses holds the import rules of docs/design.md "Packages": a
// library package imports only the idemgate packages its row names, so
// none imports the proving ground (internal/, the suites) and no arrow
// climbs back up. Every directory with non-test Go code outside internal/,
// cmd/, scripts/, e2e/ and the suites must have a row.
func TestTwoHouses(t *testing.T) {
	const mod = "github.com/idemgate/idemgate/"
	stores := []string{"store/memstore", "store/redisstore", "store/sqlstore", "store/datastorestore", "store/firestorestore"}
	allowed := map[string][]string{
		"store":                  nil,
		"outbox":                 nil,
		"pushenvelope":           nil,
		"pushauth":               nil,
		"gateway":                {"store", "outbox", "pushenvelope"},
		"cloudevent":             {"gateway", "pushenvelope"},
		"pull":                   {"gateway", "pushenvelope"},
		"relay":                  {"outbox"},
		"storeurl":               append([]string{"store"}, stores...),
		"store/internal/record":  {"store"},
		"store/internal/outboxq": {"outbox"},
		"store/internal/layout":  {"store/internal/record", "store/internal/outboxq"},
	}
	for _, s := range stores {
		allowed[s] = []string{"store", "outbox", "store/internal/record", "store/internal/outboxq", "store/internal/layout"}
	}
	harness := func(dir string) bool {
		return dir == "." || strings.HasPrefix(dir, "internal/") || strings.HasPrefix(dir, "cmd/") ||
			strings.HasPrefix(dir, "scripts/") || strings.HasPrefix(dir, "e2e") || dir == "store/storetest" ||
			dir == "relay/relaytest" || strings.Contains(dir, "testdata")
	}
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || !d.IsDir():
			return err
		case dir != "." && strings.HasPrefix(d.Name(), "."):
			return fs.SkipDir
		case harness(dir):
			return nil
		}
		pkg, err := build.ImportDir(dir, 0)
		if _, none := err.(*build.NoGoError); none {
			return nil
		}
		if err != nil {
			return err
		}
		want, ok := allowed[dir]
		if !ok {
			t.Errorf("%s: a library package without a row in docs/design.md \"Packages\" (and in this test)", dir)
			return nil
		}
		for _, imp := range pkg.Imports {
			if p, ours := strings.CutPrefix(imp, mod); ours && !slices.Contains(want, p) {
				t.Errorf("%s imports %s: not among the packages it may import (%v)", dir, p, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
