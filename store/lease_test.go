package store

import (
	"errors"
	"testing"
	"time"
)

func TestCheckLease(t *testing.T) {
	for _, tc := range []struct {
		lease, ttl time.Duration
		ok         bool
	}{
		{time.Minute, time.Hour, true},
		{time.Hour - time.Nanosecond, time.Hour, true},
		{time.Hour, time.Hour, false},
		{2 * time.Hour, time.Hour, false},
	} {
		if err := CheckLease(tc.lease, tc.ttl); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrLeaseTooLong)) {
			t.Errorf("CheckLease(%v, %v) = %v, want ok %v (or ErrLeaseTooLong)", tc.lease, tc.ttl, err, tc.ok)
		}
	}
}

func TestFenceAt(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, tc := range []struct{ old, want int64 }{
		{0, now},           // a new record starts at the clock
		{7, now},           // a record of an earlier version jumps to it
		{now - 1, now},     // one raise a microsecond keeps to the clock
		{now, now + 1},     // a second raise in the same microsecond adds one
		{now + 5, now + 6}, // a fence ahead of the clock still rises
	} {
		if got := FenceAt(tc.old, now); got != tc.want {
			t.Errorf("FenceAt(%d, now) = %d, want %d", tc.old, got, tc.want)
		}
	}
}
