package outboxq

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/outbox"
)

func TestPlanner(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	due, held := now, now.Add(time.Second)
	h := func(id, key string, d time.Time) Head { return Head{ID: id, Msg: Msg{OrderKey: key, Due: d}} }
	dead := func(id, key string, holds bool) Head {
		return Head{ID: id, Msg: Msg{OrderKey: key, Due: Never, Dead: true, Holds: holds}}
	}
	firsts := map[string][]Head{
		"k": {h("k1", "k", due), h("k2", "k", due), h("k3", "k", due)},
		"h": {h("h1", "h", held), h("h2", "h", due)},
		"d": {dead("d1", "d", true), h("d2", "d", due)},
		"r": {dead("r1", "r", false), h("r2", "r", due)},
	}
	queries := 0
	first := func(key string) ([]Head, error) { queries++; return firsts[key], nil }
	cands := []Head{h("a", "", due), h("h2", "h", due), h("k2", "k", due), h("k3", "k", due), h("d2", "d", due), h("r2", "r", due), h("b", "", due)}
	tests := []struct {
		name    string
		limit   int
		want    []string
		queries int
	}{
		{"all", 10, []string{"a", "k1", "k2", "k3", "r2", "b"}, 4},
		{"limited", 3, []string{"a", "k1", "k2"}, 2},
	}
	for _, tt := range tests {
		queries = 0
		p := NewPlanner(tt.limit, now, first)
		for _, c := range cands {
			if err := p.Add(c); err != nil {
				t.Fatal(err)
			}
		}
		if got := p.IDs(); !slices.Equal(got, tt.want) || queries != tt.queries || p.Full() != (len(tt.want) == tt.limit) {
			t.Errorf("%s: IDs = %v after %d queries; want %v after %d: a key brings its first takeable messages once, a held, backing-off or holding dead one stops it, a released dead one does not", tt.name, got, queries, tt.want, tt.queries)
		}
	}
	boom := errors.New("query failed")
	if err := NewPlanner(10, now, func(string) ([]Head, error) { return nil, boom }).Add(h("k2", "k", due)); !errors.Is(err, boom) {
		t.Errorf("Add with a failing query = %v, want its error", err)
	}
}

func TestPick(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	due, held := now, now.Add(time.Second)
	tests := []struct {
		name string
		msgs []*Msg
		want []int
	}{
		{"held blocks its key", []*Msg{
			{OrderKey: "k", Seq: 1, Due: held}, // held by another Take, or backing off
			{OrderKey: "k", Seq: 2, Due: due},  // behind it
			{OrderKey: "u", Seq: 1, Due: due},  // another key
			nil,                                // gone
			{Due: held},                        // unordered, held
			{Due: due},                         // unordered, due
		}, []int{2, 5}},
		{"dead and holding blocks its key", []*Msg{
			{OrderKey: "k", Seq: 1, Due: Never, Dead: true, Holds: true},
			{OrderKey: "k", Seq: 2, Due: due},
			{Due: Never, Dead: true, Holds: true},
			{Due: due},
		}, []int{3}},
		{"dead and released blocks nothing", []*Msg{
			{OrderKey: "k", Seq: 1, Due: Never, Dead: true},
			{OrderKey: "k", Seq: 2, Due: due},
		}, []int{1}},
		{"a key in its sequence at its first place", []*Msg{
			{Due: due},
			{OrderKey: "k", Seq: 7, Due: due},
			{Due: due},
			{OrderKey: "k", Seq: 3, Due: due},
			{OrderKey: "k", Seq: 9, Due: held},
			{OrderKey: "k", Seq: 5, Due: due},
		}, []int{0, 3, 5, 1, 2}},
	}
	for _, tt := range tests {
		if got := Pick(tt.msgs, now); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Pick = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNumber(t *testing.T) {
	ps, err := outbox.Prepare("p", []outbox.Message{
		{Topic: "ttt", OrderingKey: "k"}, {Topic: "ttt"}, {Topic: "projects/x/topics/ttt", OrderingKey: "k"}, {Topic: "ttt", OrderingKey: "j"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ms := Queued(ps, time.Now())
	keys := OrderKeys(ms)
	if len(keys) != 2 || keys[0] != outbox.OrderKey("ttt", "k") || keys[1] != outbox.OrderKey("ttt", "j") {
		t.Fatalf("OrderKeys = %v, want k's then j's, once each", keys)
	}
	last := map[string]int64{keys[0]: 40}
	Number(ms, last)
	if ms[0].Seq != 41 || ms[1].Seq != 0 || ms[2].Seq != 42 || ms[3].Seq != 1 || last[keys[0]] != 42 || last[keys[1]] != 1 {
		t.Errorf("seqs %d %d %d %d, last %v; want 41 0 42 1 after k's 40", ms[0].Seq, ms[1].Seq, ms[2].Seq, ms[3].Seq, last)
	}
	if ms[0].Version == "" || ms[0].Version == ms[2].Version {
		t.Errorf("versions %q and %q, want distinct ones", ms[0].Version, ms[2].Version)
	}
}

func TestSettle(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	stored := func() *Stored { return &Stored{Version: "v1", Token: "T", Due: now, OrderKey: "k"} }
	p := outbox.Pending{ID: ID("ck", "v1"), Token: "T"}
	acts, err := Actions([]outbox.Pending{p}, []outbox.Failure{{Pending: p, Reason: "x"}})
	if err != nil || len(acts) != 1 || !acts[0].Sent {
		t.Fatalf("Actions of one message sent and failed = %+v, %v; want it sent", acts, err)
	}
	if del, _ := acts[0].Apply(&Stored{Version: "v2"}, now); del {
		t.Error("a sent v1 deletes v2")
	}
	if del, _ := acts[0].Apply(&Stored{Version: "v1", Token: "other"}, now); !del {
		t.Error("a sent v1 held by another Take since is not deleted")
	}
	fail := func(f outbox.Failure) (*Stored, bool) {
		f.Pending = p
		acts, err := Actions(nil, []outbox.Failure{f})
		if err != nil {
			t.Fatal(err)
		}
		m := stored()
		_, w := acts[0].Apply(m, now)
		return m, w
	}
	if m, w := fail(outbox.Failure{After: time.Minute}); !w || m.Attempts != 0 || !m.Due.Equal(now.Add(time.Minute)) || m.Token != "" {
		t.Errorf("untried with a backoff: %+v, want no attempt, due a minute on, no token", m)
	}
	if m, w := fail(outbox.Failure{Reason: strings.Repeat("é", 400), Dead: true}); !w || m.Attempts != 1 || len(m.Reason) != MaxReason || !utf8.ValidString(m.Reason) || !m.Due.Equal(Never) || !m.Died.Equal(now) || !m.Holds {
		t.Errorf("dead: %+v, want an attempt, the reason cut to %d bytes, dead now, holding its key", m, MaxReason)
	}
	if m, _ := fail(outbox.Failure{Dead: true, Release: true}); m.Holds {
		t.Errorf("dead with Release holds its key")
	}
	free := &Stored{Version: "v1", Token: "T", Due: now}
	a := Action{ChildKey: "ck", Version: "v1", Token: "T", Failure: outbox.Failure{Pending: p, Dead: true}}
	if a.Apply(free, now); free.Holds || free.Died.IsZero() {
		t.Errorf("dead without an ordering key: %+v, want dead, holding nothing", free)
	}
	m := stored()
	m.Token = "other"
	if _, w := acts[0].Apply(m, now); w {
		t.Error("a failure applied to a message another Take holds")
	}
	if _, err := Actions([]outbox.Pending{{ID: "ck"}}, nil); err == nil {
		t.Error("Actions took an ID without a version")
	}
	dead, _ := fail(outbox.Failure{Reason: "r", Dead: true})
	if Revive(dead, "v2", now) {
		t.Error("Revive of another version")
	}
	if !Revive(dead, "v1", now) || dead.Attempts != 0 || dead.Reason != "" || !dead.Died.IsZero() || !dead.Due.Equal(now) {
		t.Errorf("revived: %+v, want due now, no attempts, no reason, alive", dead)
	}
	if Revive(dead, "v1", now) {
		t.Error("Revive of a live message")
	}
}
