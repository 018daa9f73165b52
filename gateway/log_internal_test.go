package gateway

import (
	"testing"
	"time"
)

// Every duration a log line carries is in milliseconds, fractions kept,
// under a name ending in _ms: a reader compares lines of every surface by
// the same unit.
func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want float64
	}{
		{0, 0},
		{time.Millisecond, 1},
		{1500 * time.Microsecond, 1.5},
		{3 * time.Second, 3000},
		{250 * time.Nanosecond, 0.00025},
	} {
		a := millis("duration", tc.d)
		if a.Key != "duration_ms" {
			t.Errorf("Millis(%v).Key = %q, want %q", tc.d, a.Key, "duration_ms")
		}
		if got := a.Value.Float64(); got != tc.want {
			t.Errorf("Millis(%v) = %v ms, want %v", tc.d, got, tc.want)
		}
	}
}
