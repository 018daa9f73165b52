package outboxq

import (
	"slices"
	"time"
)

// Seq is an order key's sequence, one entity or document per key. Take
// finds keys by Due, never by their messages, so messages waiting behind
// a key's held or dead first one cost it nothing.
type Seq struct {
	// Last is the last place given to one of the key's messages; Revive
	// skips one per message it puts back, so a Take that saw the key
	// before sees Last changed and does not hide the key.
	Last int64
	// Due is when a message of the key may next be taken, never later
	// than its first can. A Take moves it on to its lease's end or its
	// blocker's due (Never for a dead holder), or zero for an empty key;
	// CompleteTx, Settle and Revive lower it.
	Due time.Time
}

// Lower makes s due at at unless due earlier, reporting whether it changed.
func (s *Seq) Lower(at time.Time) bool {
	if !s.Due.IsZero() && !at.Before(s.Due) {
		return false
	}
	s.Due = at
	return true
}

// Key is an order key as a Take's query of the due sequences found it.
type Key struct {
	OrderKey string
	Seq
}

// ScanPages bounds the due order keys a Take reads to ScanPages times its
// limit, looking past keys that turn out to wait (whose Due it moves on).
const ScanPages = 4

// The most entities a Take's transaction reads and writes: Datastore's
// limits of a lookup and a commit.
const (
	maxTakeReads  = 1000
	maxTakeWrites = 500
)

// KeyLimit returns how many due order keys a Take of limit messages reads:
// ScanPages times limit, fewer if its transaction (the messages, and each
// key's sequence and first message) could overflow a lookup.
func KeyLimit(limit int) int {
	return max(1, min(ScanPages*limit, (maxTakeReads-limit)/2))
}

// Head is a message as a Take's query found it.
type Head struct {
	ID       string // the entity's name, the document's ID: its child key
	Enqueued time.Time
	Msg
}

// Planner chooses, oldest first, at most limit messages a Take reads in
// its transaction, from the due unordered messages and the due order
// keys. A key stands for its first messages up to one that is held, backs
// off, or is dead and holds it. What it found of each key lets the
// transaction move the key's Due on ([Planner.Hints]).
type Planner struct {
	limit   int
	now     time.Time
	first   func(orderKey string) ([]Head, error)
	groups  []group // chosen: a free message each, or a key's first messages
	n       int     // messages chosen
	chosen  map[string]bool
	looked  map[string]*look
	keys    []string          // the keys looked at, in order
	fetched map[string][]Head // first's answers
}

// group is messages chosen together (an unordered one, or a key's first
// ones), ordered by due time, then by their first's enqueue.
type group struct {
	due, enqueued time.Time
	ids           []string
}

// look is what a Planner found of an order key.
type look struct {
	last  int64 // the key's Seq.Last as the query of keys read it
	took  bool  // some of its first messages were chosen
	empty bool  // it had no messages
	head  *Head // else, when none was chosen: its first message, which blocks it
}

// NewPlanner returns a Planner of a Take of limit messages at now.
func NewPlanner(limit int, now time.Time, first func(orderKey string) ([]Head, error)) *Planner {
	return &Planner{limit: limit, now: now, first: first, chosen: map[string]bool{}, looked: map[string]*look{}, fetched: map[string][]Head{}}
}

// Full reports whether the Planner holds limit messages.
func (p *Planner) Full() bool { return p.n >= p.limit }

// IDs returns the messages chosen, in order.
func (p *Planner) IDs() []string {
	gs := slices.Clone(p.groups)
	slices.SortStableFunc(gs, func(a, b group) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return a.enqueued.Compare(b.enqueued)
	})
	var out []string
	for _, g := range gs {
		out = append(out, g.ids...)
	}
	return out
}

// Plan considers free (due unordered messages, in taking order) and keys
// (due order keys, oldest first) until it holds limit messages.
func (p *Planner) Plan(free []Head, keys []Key) error {
	for len(free)+len(keys) > 0 && !p.Full() {
		isKey := len(free) == 0
		if !isKey && len(keys) > 0 {
			switch c := keys[0].Due.Compare(free[0].Due); {
			case c < 0:
				isKey = true
			case c == 0: // one instant: the one enqueued first
				fs, err := p.firsts(keys[0].OrderKey)
				if err != nil {
					return err
				}
				isKey = len(fs) > 0 && fs[0].Enqueued.Before(free[0].Enqueued)
			}
		}
		if isKey {
			if err := p.key(keys[0]); err != nil {
				return err
			}
			keys = keys[1:]
			continue
		}
		if takeable(&free[0].Msg, p.now) {
			p.add(free[0], true)
		}
		free = free[1:]
	}
	return nil
}

// add chooses h: first, in a group of its own, else in the last group.
func (p *Planner) add(h Head, first bool) {
	if p.chosen[h.ID] || p.Full() {
		return
	}
	p.chosen[h.ID] = true
	p.n++
	if first {
		p.groups = append(p.groups, group{due: h.Due, enqueued: h.Enqueued})
	}
	g := &p.groups[len(p.groups)-1]
	g.ids = append(g.ids, h.ID)
}

// key chooses the first takeable messages of k.
func (p *Planner) key(k Key) error {
	if p.looked[k.OrderKey] != nil {
		return nil
	}
	firsts, err := p.firsts(k.OrderKey)
	if err != nil {
		return err
	}
	l := &look{last: k.Last, empty: len(firsts) == 0}
	p.looked[k.OrderKey] = l
	p.keys = append(p.keys, k.OrderKey)
	for _, f := range firsts {
		switch {
		case f.Dead && !f.Holds:
			continue
		case !takeable(&f.Msg, p.now):
			if !l.took {
				l.head = &f
			}
			return nil
		}
		if !l.took {
			f.Due = k.Due // the key goes out at its place
		}
		p.add(f, !l.took)
		l.took = true
	}
	return nil
}

// firsts returns the first messages of orderKey, querying them once.
func (p *Planner) firsts(orderKey string) ([]Head, error) {
	if fs, ok := p.fetched[orderKey]; ok {
		return fs, nil
	}
	fs, err := p.first(orderKey)
	if err == nil {
		p.fetched[orderKey] = fs
	}
	return fs, err
}

// Keys returns the order keys looked at, whose sequences the transaction reads.
func (p *Planner) Keys() []string { return p.keys }

// Heads returns the first messages that block the keys looked at, which
// the transaction reads too.
func (p *Planner) Heads() []string {
	var out []string
	for _, k := range p.Keys() {
		if h := p.looked[k].head; h != nil {
			out = append(out, h.ID)
		}
	}
	return out
}

// Hints moves on the Due of the sequences (seqs, as the transaction read
// them) of the keys looked at: to the lease's end for a key it took from
// (took), to the due of its blocking first message (heads, as read), to
// zero for an empty key. It leaves a key whose Last changed since, or whose
// blocker moved. It returns the keys changed, at most what a commit holds
// beside the messages taken (a key left costs a later Take a look).
func (p *Planner) Hints(seqs map[string]*Seq, heads map[string]*Msg, took []*Msg, now time.Time, lease time.Duration) []string {
	var out []string
	for _, k := range p.keys {
		if len(out)+len(took) >= maxTakeWrites {
			break
		}
		l, s := p.looked[k], seqs[k]
		if s == nil || s.Last != l.last {
			continue
		}
		due := s.Due
		switch h := l.head; {
		case slices.ContainsFunc(took, func(m *Msg) bool { return m.OrderKey == k }):
			due = now.Add(lease)
		case l.took:
			continue // chosen, then changed since: not taken
		case l.empty:
			due = time.Time{}
		case h != nil:
			m := heads[h.ID]
			if m == nil || m.OrderKey != k || m.Seq != h.Seq || takeable(m, now) {
				continue
			}
			due = m.Due
		}
		if !due.Equal(s.Due) {
			s.Due = due
			out = append(out, k)
		}
	}
	return out
}

// SettleKeys returns the order keys of acts, whose sequences Settle reads.
func SettleKeys(acts []Action) []string {
	return distinctKeys(acts, func(a Action) string { return a.OrderKey })
}

// Settle applies acts at now to msgs as the transaction read them (nil for
// one gone), and lowers their keys' seqs: to now after a delete or a
// release, to a backoff's end. It returns the indexes to delete and to
// rewrite, and the keys changed.
func Settle(acts []Action, msgs []*Stored, seqs map[string]*Seq, now time.Time) (dels, writes []int, keys []string) {
	for i, m := range msgs {
		if m == nil {
			continue // deleted already
		}
		key := m.OrderKey
		del, write := acts[i].Apply(m, now)
		free := now
		switch {
		case del:
			dels = append(dels, i)
		case !write:
			continue
		case m.OrderKey == "": // released, or unordered
			writes = append(writes, i)
		case !m.Died.IsZero(): // dead and holding: frees nothing
			writes = append(writes, i)
			continue
		default:
			writes = append(writes, i)
			free = m.Due
		}
		if s := seqs[key]; key != "" && s != nil && s.Lower(free) && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return dels, writes, keys
}

// Revived records in seqs (as read; a missing one is added) that the
// ordered messages of revived are back in their keys at now: a place
// skipped and the key due. It returns the keys changed.
func Revived(revived []Stored, seqs map[string]*Seq, now time.Time) []string {
	var keys []string
	for _, m := range revived {
		if m.OrderKey == "" {
			continue
		}
		s := seqs[m.OrderKey]
		if s == nil {
			s = &Seq{}
			seqs[m.OrderKey] = s
		}
		s.Last++
		s.Lower(now)
		if !slices.Contains(keys, m.OrderKey) {
			keys = append(keys, m.OrderKey)
		}
	}
	return keys
}
