package sqlstore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPositional(t *testing.T) {
	q := positional("a = $1 AND b = $2 OR c = $1 + $10")
	if want := "a = ? AND b = ? OR c = ? + ?"; q.text != want {
		t.Errorf("text = %q, want %q", q.text, want)
	}
	args := make([]any, 10)
	for i := range args {
		args[i] = i + 1
	}
	if diff := cmp.Diff([]any{1, 2, 1, 10}, q.args(args...)); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}

func TestNumbered(t *testing.T) {
	q := numbered("a = $1 AND b = $2")
	if diff := cmp.Diff([]any{"x", "y"}, q.args("x", "y")); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}
