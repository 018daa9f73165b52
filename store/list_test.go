package store_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

func TestParseStates(t *testing.T) {
	for _, in := range []string{"held", "lapsed,done", "held,lapsed,released,done"} {
		s, err := store.ParseStates(in)
		if err != nil || s.String() != in {
			t.Errorf("ParseStates(%q) = %v (%q), %v; want it back", in, s, s.String(), err)
		}
	}
	if s, err := store.ParseStates(""); s != 0 || err != nil {
		t.Errorf(`ParseStates("") = %v, %v; want 0 (every state)`, s, err)
	}
	if _, err := store.ParseStates("held,stuck"); err == nil {
		t.Error(`ParseStates("held,stuck") succeeded; want an error naming the unknown state`)
	}
}

func TestListStateAndAge(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	claimed := now.Add(-10 * time.Minute)
	tests := []struct {
		name  string
		r     store.Record
		state store.States
		age   time.Duration
	}{
		{"held: since the claim, by its fence", store.Record{State: store.Claimed, Token: "t", Fence: claimed.UnixMicro(), LeaseUntil: now.Add(time.Minute)}, store.StateHeld, 10 * time.Minute},
		{"lapsed: since the lease ended", store.Record{State: store.Claimed, Token: "t", Fence: claimed.UnixMicro(), LeaseUntil: now.Add(-3 * time.Minute)}, store.StateLapsed, 3 * time.Minute},
		{"released: since the release", store.Record{State: store.Claimed, Fence: claimed.UnixMicro() + 1, LeaseUntil: now.Add(-2 * time.Minute)}, store.StateReleased, 2 * time.Minute},
		{"done: since the completion", store.Record{State: store.Done, Fence: claimed.UnixMicro(), CompletedAt: now.Add(-time.Minute)}, store.StateDone, time.Minute},
		{"a clock that stepped back reads 0", store.Record{State: store.Claimed, Token: "t", Fence: now.Add(time.Second).UnixMicro(), LeaseUntil: now.Add(time.Minute)}, store.StateHeld, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.ReadAt = now
			if got := tt.r.ListState(); got != tt.state {
				t.Errorf("ListState = %v, want %v", got, tt.state)
			}
			if got := tt.r.Age(); got != tt.age {
				t.Errorf("Age = %v, want %v", got, tt.age)
			}
			o := store.ListOptions{States: tt.state, OlderThan: tt.age}
			if !o.Match(tt.r) {
				t.Errorf("Match(%+v) = false, want true at its own state and age", o)
			}
			o.OlderThan += time.Millisecond
			if o.Match(tt.r) {
				t.Errorf("Match(%+v) = true, want false just past its age", o)
			}
		})
	}
}
