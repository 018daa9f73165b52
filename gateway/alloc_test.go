package gateway_test

import (
	"context"
	"strconv"
	"testing"
)

// TestLockAllocations holds a fresh Lock on memstore to its allocations:
// 7 without renewal, 11 with it (docs/benchmarks.md). A change that adds
// one to every message fails here, not in a benchmark nobody reads.
func TestLockAllocations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		renew bool
		max   float64
	}{
		{"NoRenew", false, 7},
		{"Renew", true, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := benchGateway(t, tc.renew, true)
			keys := make([]string, 256)
			for i := range keys {
				keys[i] = "m" + strconv.Itoa(i)
			}
			ctx, i := context.Background(), 0
			got := testing.AllocsPerRun(1000, func() {
				if err := g.Lock(ctx, keys[i%len(keys)], nop); err != nil {
					t.Fatal(err)
				}
				i++
			})
			if got > tc.max {
				t.Errorf("a fresh Lock allocates %.1f times, want at most %.0f", got, tc.max)
			}
		})
	}
}
