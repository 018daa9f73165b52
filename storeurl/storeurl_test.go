package storeurl

import (
	"path/filepath"
	"testing"
	"time"
)

// TestClose: Close releases what Open opened, so the store fails after it,
// and is a no-op for a store that holds nothing to release.
func TestClose(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		o, err := Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "c.db"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Store.Claim(t.Context(), "before", time.Minute); err != nil {
			t.Fatalf("Claim before Close: %v", err)
		}
		if err := o.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := o.Store.Claim(t.Context(), "after", time.Minute); err == nil {
			t.Error("Claim after Close succeeded: Close must close the connection Open made")
		}
	})
	t.Run("memory", func(t *testing.T) {
		o, err := Open(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := o.Close(); err != nil {
				t.Errorf("Close #%d of memory:// = %v, want nil", i+1, err)
			}
		}
	})
}
