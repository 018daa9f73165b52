package outboxq

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	firsts := map[[2]string][]string{
		{"t", "k"}: {"k1", "k2", "k3"},
		{"u", "k"}: {"u1"},
	}
	first := func(topic, key string) ([]string, error) { return firsts[[2]string{topic, key}], nil }
	cands := []Head{{ID: "a"}, {ID: "k2", Topic: "t", OrderingKey: "k"}, {ID: "k3", Topic: "t", OrderingKey: "k"}, {ID: "u1", Topic: "u", OrderingKey: "k"}, {ID: "b"}}
	tests := []struct {
		name  string
		limit int
		want  []string
	}{
		{"all", 10, []string{"a", "k1", "k2", "k3", "u1", "b"}},
		{"limited", 3, []string{"a", "k1", "k2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(cands, tt.limit, first)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Plan = %v, %v; want %v: an ordered candidate brings its key's first messages, in order, once", got, err, tt.want)
			}
		})
	}
	boom := errors.New("query failed")
	if _, err := Plan(cands, 10, func(string, string) ([]string, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("Plan with a failing query = %v, want its error", err)
	}
}

func TestPick(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	due, held := now, now.Add(time.Second)
	msgs := []*Msg{
		{Topic: "t", OrderingKey: "k", Due: held}, // held by another Take
		{Topic: "t", OrderingKey: "k", Due: due},  // behind it
		{Topic: "u", OrderingKey: "k", Due: due},  // another topic's key
		nil,                                       // gone
		{Topic: "t", Due: held},                   // unordered, held
		{Topic: "t", Due: due},                    // unordered, due
	}
	if got, want := Pick(msgs, now), []int{2, 5}; !slices.Equal(got, want) {
		t.Errorf("Pick = %v, want %v: a held message keeps the later ones of its topic and key behind it, and nothing else", got, want)
	}
}
