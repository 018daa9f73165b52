package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// offClock is a store clock off this machine's by a fixed skew.
type offClock time.Duration

func (d offClock) Now(context.Context) (time.Time, error) {
	return time.Now().Add(time.Duration(d)), nil
}

func TestCheckClockSkew(t *testing.T) {
	for _, tc := range []struct {
		skew, max time.Duration
		problem   bool
		want      string
	}{
		{0, 2 * time.Second, false, "ok    clock     the store's clock is "},
		{time.Minute, 2 * time.Second, true, "FAIL  clock     the store's clock is 1m0s ahead of this machine's"},
		{-time.Minute, 2 * time.Second, true, "1m0s behind this machine's"},
		{time.Minute, time.Hour, false, "ok    clock     the store's clock is 1m0s ahead of"},
	} {
		var out bytes.Buffer
		r := &report{c: &cli{stdout: &out}}
		if err := r.clock(t.Context(), offClock(tc.skew), tc.max); err != nil {
			t.Fatal(err)
		}
		if got := r.problems > 0; got != tc.problem || !strings.Contains(out.String(), tc.want) {
			t.Errorf("skew %v, -max-skew %v: problem = %v, output %q; want problem = %v and %q", tc.skew, tc.max, got, out.String(), tc.problem, tc.want)
		}
	}
}
