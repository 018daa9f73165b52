package outboxq

import (
	"slices"
	"time"
)

// Seq is an order key's sequence, one entity or document per key. Take
// finds the keys it may take from by Due, never by their messages, so
// that the messages waiting behind a key's held or dead first one cost it
// nothing: they are not in its queries.
type Seq struct {
	// Last is the last place given to one of the key's messages. Revive
	// skips a place too, for each message it puts back in the key: so a
	// Take that saw the key before, without that message, sees Last
	// changed and does not hide the key.
	Last int64
	// Due is when a message of the key may next be taken, never later
	// than when its first can: set by CompleteTx when the key had none,
	// lowered by Settle and Revive, moved on by a Take to the end of its
	// lease, or to the due time of the first message that it found
	// blocks the key (Never for a dead one that holds it). Zero when a
	// Take found the key without messages: no query finds it then.
	Due time.Time
}

// Lower makes s due at at unless it is due earlier. It reports whether s
// changed.
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

// ScanPages bounds the due order keys a Take reads: at most ScanPages times
// its limit, looking for takeable messages past keys that turn out to
// wait (their Due set before their first message was taken, or before
// they had none left), whose Due the Take then moves on.
const ScanPages = 4

// The most entities or documents a Take's transaction reads, and writes,
// in Datastore's limits of a lookup and a commit.
const (
	maxTakeReads  = 1000
	maxTakeWrites = 500
)

// KeyLimit returns how many due order keys a Take of limit messages reads:
// ScanPages times limit, fewer when its transaction, which reads the
// messages chosen and each key's sequence and first message, could read
// more than a lookup holds.
func KeyLimit(limit int) int {
	return max(1, min(ScanPages*limit, (maxTakeReads-limit)/2))
}

// Head is a message as a Take's query found it.
type Head struct {
	ID       string // the entity's name, the document's ID: its child key
	Enqueued time.Time
	Msg
}

// Planner chooses the messages a Take reads in its transaction, at most
// limit, from the due unordered messages and the due order keys, oldest
// first. An order key stands for its first messages, which first returns
// (in the key's order): those up to the first that is held, waits out a
// backoff, or is dead and holds the key (a dead one that released it is
// skipped). The Planner remembers what it found of each key, so that the
// Take's transaction can move the key's Due on ([Planner.Hints]).
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

// group is messages a Planner chose together: an unordered one, or the
// first messages of a key. Groups go out oldest first, by the message's
// or the key's due time, then by their first message's enqueue.
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

// Plan considers free, due unordered messages in the order to take them,
// and keys, due order keys oldest first, until it holds limit messages.
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

// Keys returns the order keys the Planner looked at, whose sequences the
// Take's transaction reads, in order.
func (p *Planner) Keys() []string { return p.keys }

// Heads returns the first messages that block the keys the Planner looked
// at, which the Take's transaction reads too.
func (p *Planner) Heads() []string {
	var out []string
	for _, k := range p.Keys() {
		if h := p.looked[k].head; h != nil {
			out = append(out, h.ID)
		}
	}
	return out
}

// Hints moves on the Due of the sequences of the keys the Planner looked
// at, as the Take's transaction read them at now (seqs by order key; nil
// for one that is gone): to the end of lease for a key of which it took
// messages (took, as [Pick] chose them), to the due time of the first
// message that blocks it (heads by ID, as read), to zero for a key that
// had none. It leaves a key whose Last changed since the Planner's query
// (CompleteTx or Revive may have put a message in it), and one whose
// first message is not the one the Planner found or no longer blocks it.
// It returns the keys whose sequence it changed, as many as a commit
// holds beside the messages taken (a key left as it is costs a later Take
// a look, no more).
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

// SettleKeys returns the order keys of acts, whose sequences a Settle
// reads with the messages.
func SettleKeys(acts []Action) []string {
	return distinctKeys(acts, func(a Action) string { return a.OrderKey })
}

// Settle applies acts at now to msgs, the messages stored under their
// child keys as Settle's transaction read them (nil for one gone), and
// lowers the sequences of their keys (seqs by order key, as read) to when
// a message of the key may be taken because of it: at once after one is
// deleted or released, at the end of a backoff. It returns the indexes of
// the messages to delete and to rewrite, and the keys whose sequence it
// changed.
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

// Revived records in seqs (by order key, as Revive's transaction read
// those of [OrderKeys] of revived; a missing one is added) that the
// ordered messages of revived are back in their keys at now: a place
// skipped and the key due. It returns the keys whose sequence it changed.
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
