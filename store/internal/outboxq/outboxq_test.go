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
	h := func(id, key string, seq int64, d time.Time) Head {
		return Head{ID: id, Msg: Msg{OrderKey: key, Seq: seq, Due: d}}
	}
	dead := func(id, key string, seq int64, holds bool) Head {
		return Head{ID: id, Msg: Msg{OrderKey: key, Seq: seq, Due: Never, Dead: true, Holds: holds}}
	}
	firsts := map[string][]Head{
		"k": {h("k1", "k", 1, due), h("k2", "k", 2, due), h("k3", "k", 3, due)},
		"h": {h("h1", "h", 1, held), h("h2", "h", 2, due)},
		"d": {dead("d1", "d", 1, true), h("d2", "d", 2, due)},
		"r": {dead("r1", "r", 1, false), h("r2", "r", 2, due)},
		"e": nil,
	}
	queries := 0
	first := func(key string) ([]Head, error) { queries++; return firsts[key], nil }
	at := func(ms int) time.Time { return now.Add(time.Duration(ms-10) * time.Millisecond) }
	free := []Head{h("a", "", 0, at(1)), h("b", "", 0, at(7))}
	var keys []Key
	for i, k := range []string{"h", "k", "e", "d", "r"} {
		keys = append(keys, Key{OrderKey: k, Seq: Seq{Last: 5, Due: at(2 + i)}})
	}
	tests := []struct {
		name    string
		limit   int
		want    []string
		queries int
	}{
		{"all", 10, []string{"a", "k1", "k2", "k3", "r2", "b"}, 5},
		{"limited", 3, []string{"a", "k1", "k2"}, 2},
	}
	for _, tt := range tests {
		queries = 0
		p := NewPlanner(tt.limit, now, first)
		if err := p.Plan(free, keys); err != nil {
			t.Fatal(err)
		}
		if got := p.IDs(); !slices.Equal(got, tt.want) || queries != tt.queries || p.Full() != (len(tt.want) == tt.limit) {
			t.Errorf("%s: IDs = %v after %d queries; want %v after %d: messages and keys oldest first, a key brings its first takeable messages once, a held, backing-off or holding dead one stops it, a released dead one does not", tt.name, got, queries, tt.want, tt.queries)
		}
	}
	boom := errors.New("query failed")
	if err := NewPlanner(10, now, func(string) ([]Head, error) { return nil, boom }).Plan(nil, keys); !errors.Is(err, boom) {
		t.Errorf("Plan with a failing query = %v, want its error", err)
	}
}

// TestHints: a Take moves each key it looked at on to when it may next be
// taken, unless the key or its first message changed since it looked.
func TestHints(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	lease, later := time.Minute, now.Add(time.Hour)
	msg := func(key string, seq int64, d time.Time) Msg { return Msg{OrderKey: key, Seq: seq, Due: d} }
	firsts := map[string][]Head{
		"took":    {{ID: "t1", Msg: msg("took", 1, now)}},
		"held":    {{ID: "h1", Msg: msg("held", 1, later)}, {ID: "h2", Msg: msg("held", 2, now)}},
		"dead":    {{ID: "d1", Msg: Msg{OrderKey: "dead", Seq: 1, Due: Never, Dead: true, Holds: true}}},
		"empty":   nil,
		"added":   nil,                                         // Last changes: a message came
		"freed":   {{ID: "f1", Msg: msg("freed", 1, later)}},   // given back since
		"renewed": {{ID: "n1", Msg: msg("renewed", 1, later)}}, // written anew, at another place
	}
	p := NewPlanner(10, now, func(k string) ([]Head, error) { return firsts[k], nil })
	var keys []Key
	for _, k := range []string{"took", "held", "dead", "empty", "added", "freed", "renewed"} {
		keys = append(keys, Key{OrderKey: k, Seq: Seq{Last: 3, Due: now}})
	}
	if err := p.Plan(nil, keys); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.IDs(), []string{"t1"}) || !slices.Equal(p.Heads(), []string{"h1", "d1", "f1", "n1"}) {
		t.Fatalf("IDs %v, Heads %v; want [t1], [h1 d1 f1 n1]", p.IDs(), p.Heads())
	}
	seqs := map[string]*Seq{}
	for _, k := range p.Keys() {
		seqs[k] = &Seq{Last: 3, Due: now}
	}
	seqs["added"].Last = 4
	h1, d1 := firsts["held"][0].Msg, firsts["dead"][0].Msg
	f1, n1 := msg("freed", 1, now), msg("renewed", 9, later)
	heads := map[string]*Msg{"h1": &h1, "d1": &d1, "f1": &f1, "n1": &n1}
	t1 := firsts["took"][0].Msg
	changed := p.Hints(seqs, heads, []*Msg{&t1}, now, lease)
	if want := []string{"took", "held", "dead", "empty"}; !slices.Equal(changed, want) {
		t.Errorf("Hints changed %v, want %v", changed, want)
	}
	for k, want := range map[string]time.Time{"took": now.Add(lease), "held": later, "dead": Never, "empty": {}, "added": now, "freed": now, "renewed": now} {
		if got := seqs[k].Due; !got.Equal(want) {
			t.Errorf("key %s: Due %v, want %v", k, got, want)
		}
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
	waits := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seqs := map[string]*Seq{keys[0]: {Last: 40, Due: waits}, keys[1]: {}}
	Number(ms, seqs)
	if ms[0].Seq != 41 || ms[1].Seq != 0 || ms[2].Seq != 42 || ms[3].Seq != 1 || seqs[keys[0]].Last != 42 || seqs[keys[1]].Last != 1 {
		t.Errorf("seqs %d %d %d %d, last %d %d; want 41 0 42 1 after k's 40", ms[0].Seq, ms[1].Seq, ms[2].Seq, ms[3].Seq, seqs[keys[0]].Last, seqs[keys[1]].Last)
	}
	if !seqs[keys[0]].Due.Equal(waits) || !seqs[keys[1]].Due.Equal(ms[3].Due) {
		t.Errorf("Due %v, %v; want a key with messages left as it was, one without due with its first message", seqs[keys[0]].Due, seqs[keys[1]].Due)
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

// TestSettleKeys: Settle makes a key due again when a message of it is
// deleted, released or given back, never later than it was; Revive skips
// a place and makes the key due.
func TestSettleKeys(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	lease := now.Add(time.Minute)
	tests := []struct {
		name    string
		sent    bool
		f       outbox.Failure
		seqDue  time.Time
		wantDue time.Time
	}{
		{"sent", true, outbox.Failure{}, lease, now},
		{"given back", false, outbox.Failure{After: time.Second}, lease, now.Add(time.Second)},
		{"released", false, outbox.Failure{Dead: true, Release: true}, lease, now},
		{"dead and holding", false, outbox.Failure{Dead: true}, lease, lease},
		{"due earlier", false, outbox.Failure{After: time.Second}, now.Add(-time.Second), now.Add(-time.Second)},
		{"none left", true, outbox.Failure{}, time.Time{}, now},
	}
	for _, tt := range tests {
		p := outbox.Pending{Message: outbox.Message{Topic: "t", OrderingKey: "o"}, ID: ID("ck", "v1"), Token: "T"}
		key := outbox.OrderKey("t", "o")
		var sent []outbox.Pending
		var failed []outbox.Failure
		if tt.sent {
			sent = []outbox.Pending{p}
		} else {
			tt.f.Pending = p
			failed = []outbox.Failure{tt.f}
		}
		acts, err := Actions(sent, failed)
		if err != nil {
			t.Fatal(err)
		}
		if got := SettleKeys(acts); !slices.Equal(got, []string{key}) {
			t.Fatalf("%s: SettleKeys = %v, want the message's order key", tt.name, got)
		}
		seqs := map[string]*Seq{key: {Last: 1, Due: tt.seqDue}}
		m := &Stored{Version: "v1", Token: "T", Due: lease, OrderKey: key, Seq: 1}
		dels, writes, changed := Settle(acts, []*Stored{m}, seqs, now)
		if len(dels)+len(writes) != 1 {
			t.Errorf("%s: deletes %v, writes %v; want the message's one", tt.name, dels, writes)
		}
		if got := seqs[key].Due; !got.Equal(tt.wantDue) || len(changed) == 1 != !tt.wantDue.Equal(tt.seqDue) {
			t.Errorf("%s: key due %v (changed %v), want %v", tt.name, got, changed, tt.wantDue)
		}
	}
	seqs := map[string]*Seq{"k": {Last: 4, Due: Never}}
	if got := Revived([]Stored{{OrderKey: "k"}, {OrderKey: ""}, {OrderKey: "j"}}, seqs, now); !slices.Equal(got, []string{"k", "j"}) {
		t.Errorf("Revived changed %v, want [k j]", got)
	}
	if s := seqs["k"]; s.Last != 5 || !s.Due.Equal(now) {
		t.Errorf("after Revive the key is %+v, want a place skipped and due now", s)
	}
}
