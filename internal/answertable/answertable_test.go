package answertable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	doc := "# D\n\n" + Heading + "\n\nProse with `code`.\n\n" +
		"| Outcome | A | B |\n|---|---|---|\n" +
		"| `won`: done | `200` ack | `ack` |\n" +
		"| `rejected`: bad | `400` nack | — (never) |\n\n" +
		"## Next\n\n| `x` | `1` | `2` |\n"
	path := filepath.Join(t.TempDir(), "design.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Table{"won": {"A": "200", "B": "ack"}, "rejected": {"A": "400", "B": ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"won": "ack", "rejected": ""}, got.Column("B")); diff != "" {
		t.Errorf("Column (-want +got):\n%s", diff)
	}
}

func TestReadRefusesARaggedRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "design.md")
	os.WriteFile(path, []byte(Heading+"\n| O | A |\n|---|---|\n| `won` | `200` | extra |\n"), 0o644)
	if _, err := Read(path); err == nil {
		t.Fatal("Read accepted a row with more cells than the heading")
	}
}

func TestTheDesignDocHasTheTable(t *testing.T) {
	got, err := Read("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 10 {
		t.Fatalf("the table has %d rows, want every outcome", len(got))
	}
}
