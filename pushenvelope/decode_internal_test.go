package pushenvelope

import (
	"bytes"
	"testing"
)

// TestReadBodyAnnouncedLengthAllocatesOnce holds readBody to what its
// Content-Length hint is for: a body whose length was announced is read
// into the one buffer made for it, never grown (a grown buffer is a copy of
// the body so far, up to preallocMax bytes, on every delivery).
func TestReadBodyAnnouncedLengthAllocatesOnce(t *testing.T) {
	for _, tc := range []struct{ n, limit int }{{1, 1 << 20}, {1000, 1 << 20}, {100_000, 1 << 20}, {100_000, 100_000}} {
		n := tc.n
		body := make([]byte, n)
		rd := bytes.NewReader(nil)
		got := testing.AllocsPerRun(20, func() {
			rd.Reset(body)
			if b, err := readBody(rd, int64(tc.limit), int64(n)); err != nil || len(b) != n {
				t.Fatalf("readBody = %d bytes, %v; want %d", len(b), err, n)
			}
		})
		if got != 1 {
			t.Errorf("reading an announced body of %d bytes (limit %d) allocates %.1f times, want once", n, tc.limit, got)
		}
	}
}
