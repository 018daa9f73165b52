package main

import (
	"errors"
	"testing"
	"time"
)

func TestTallyClassifies(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    outcome
		want nackCounts
		ack  bool
	}{
		{"200", outcome{status: 200}, nackCounts{}, true},
		{"202", outcome{status: 202}, nackCounts{}, true},
		{"203", outcome{status: 203}, nackCounts{Other: 1}, false},
		{"302", outcome{status: 302}, nackCounts{Other: 1}, false},
		{"404", outcome{status: 404}, nackCounts{Client: 1}, false},
		{"429", outcome{status: 429}, nackCounts{Client: 1}, false},
		{"500", outcome{status: 500}, nackCounts{Server: 1}, false},
		{"503", outcome{status: 503}, nackCounts{Unavailable: 1}, false},
		{"timeout", outcome{timeout: true, err: errors.New("deadline")}, nackCounts{Timeout: 1}, false},
		{"timeout after 200 header", outcome{status: 200, timeout: true, err: errors.New("deadline")}, nackCounts{Timeout: 1}, false},
		{"refused", outcome{err: errors.New("connection refused")}, nackCounts{Error: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTally()
			tl.record(tc.o, 1, classNormal)
			if tl.nacks != tc.want || (tl.acks == 1) != tc.ack || tl.deliveries != 1 {
				t.Errorf("acks %d nacks %+v, want ack=%v nacks %+v", tl.acks, tl.nacks, tc.ack, tc.want)
			}
			if tl.nacks.total()+tl.acks != 1 {
				t.Error("a delivery must count as exactly one ack or one nack")
			}
		})
	}
}

func TestTallyPercentile(t *testing.T) {
	tl := newTally()
	if got := tl.percentile(0.5); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
	for i := 100; i >= 1; i-- {
		tl.record(outcome{status: 200, latency: time.Duration(i) * time.Millisecond}, 1, classNormal)
	}
	for p, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := tl.percentile(p); got != want {
			t.Errorf("p%v = %v, want %v", p*100, got, want)
		}
	}
	if tl.maxAttempt != 1 {
		t.Errorf("max attempt = %d, want 1", tl.maxAttempt)
	}
}
