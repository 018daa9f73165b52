package e2e

import (
	"context"
	"testing"
	"time"
)

// pollEvery is how often eventually looks at a condition. Conditions are
// cheap reads of in-memory counters, so this only bounds the latency.
const pollEvery = 20 * time.Millisecond

// eventually polls check until it returns nil, and fails t with check's
// last error if that has not happened within the given time. It is the
// only way the tests wait: for a condition, never for a fixed delay.
func eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	if err := poll(t.Context(), within, check); err != nil {
		t.Fatalf("after %v: %v", within, err)
	}
}

// poll is eventually without a test: it returns check's last error when
// within has passed or ctx is done.
func poll(ctx context.Context, within time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-tick.C:
		}
	}
}

// pause returns after d, or sooner with false when ctx is done. It models
// time that passes in the world the tests simulate (the supplier's work,
// the gap before a crashed instance comes back), never synchronisation.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
