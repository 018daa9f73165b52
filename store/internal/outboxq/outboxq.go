// Package outboxq is the outbox of the Google stores, written once: the
// algorithm ([Outbox]: Take, Settle, Stats, Dead, Revive) over a [DB] each
// store implements with its queries and transactions, and the rules it
// follows: how a message is stored, which messages a Take reads again in
// its transaction and which of those it takes, how a Settle applies, and
// what one message costs in the database.
package outboxq

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/outbox"
)

// Never is the due time of a dead message: no Take's query reaches it,
// and Backlog, which counts the messages due before it, leaves it out.
// Both databases keep timestamps up to the end of year 9999.
var Never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxReason is the most bytes of a failure's reason a message keeps.
const MaxReason = 512

// takeable reports whether m, live and not held, may be taken at now.
func takeable(m *Msg, now time.Time) bool { return !m.Dead && !m.Due.After(now) }

// Msg is a message as a Take's transaction read it.
type Msg struct {
	OrderKey string
	Seq      int64     // its place in its order key
	Due      time.Time // when a Take may take it
	Dead     bool
	Holds    bool // dead, and holding its key's later messages
}

// Pick returns the indexes of the messages of msgs (in Plan's order; nil
// for one that is gone) that a Take takes at now, in the order to publish
// them: the messages of an order key by their Seq, at the place of the
// key's first, the others where Plan put them. It takes each due, live
// message, but none of an order key after one of that key that is held,
// waits out a backoff, or is dead and holds its key. A dead message that
// released its key is skipped and blocks nothing.
func Pick(msgs []*Msg, now time.Time) []int {
	var idx []int
	first := map[string]int{} // an order key's first place in idx
	for i, m := range msgs {
		if m == nil {
			continue
		}
		if _, ok := first[m.OrderKey]; !ok && m.OrderKey != "" {
			first[m.OrderKey] = len(idx)
		}
		idx = append(idx, i)
	}
	place := make(map[int]int, len(idx))
	for p, i := range idx {
		place[i] = p
		if k := msgs[i].OrderKey; k != "" {
			place[i] = first[k]
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := place[a] - place[b]; c != 0 {
			return c
		}
		return cmp.Compare(msgs[a].Seq, msgs[b].Seq)
	})
	var out []int
	blocked := map[string]bool{}
	for _, i := range idx {
		m := msgs[i]
		if m.OrderKey != "" && blocked[m.OrderKey] {
			continue
		}
		if !takeable(m, now) {
			if m.OrderKey != "" && (!m.Dead || m.Holds) {
				blocked[m.OrderKey] = true
			}
			continue
		}
		out = append(out, i)
	}
	return out
}

// Stored is an outgoing message as both stores keep it.
type Stored struct {
	Name        string // the name its child key was derived from
	Topic       string
	Data        []byte
	Attributes  map[string]string // the child key's included
	OrderingKey string
	OrderKey    string    // outbox.OrderKey of Topic and OrderingKey
	Seq         int64     // its place in its order key, from the key's sequence; 0 when unordered
	Version     string    // written at enqueue: a message written anew under its child key has another
	Enqueued    time.Time // when its transaction queued it (the completing process's clock)
	Due         time.Time // when a Take may take it; Never once dead
	Token       string    // the Take that holds it; "" before any and once given back
	Attempts    int64     // failed publishes since the enqueue or the last revival
	Reason      string    // the last failure's reason
	Died        time.Time // when a relay gave it up; zero while live
	Holds       bool      // dead, and holding its key's later messages
}

// Queued returns the messages of ps, prepared by [outbox.Prepare], as a
// transaction stores them at now: due at once, each with a version of its
// own, and its order key. Number gives them their places in their keys.
func Queued(ps []outbox.Pending, now time.Time) []Stored {
	out := make([]Stored, len(ps))
	for i, p := range ps {
		out[i] = Stored{
			Name: p.Name, Topic: p.Topic, Data: p.Data, Attributes: p.Attributes,
			OrderingKey: p.OrderingKey, OrderKey: outbox.OrderKey(p.Topic, p.OrderingKey),
			Version:  rand.Text(),
			Enqueued: now.Add(time.Duration(i) * time.Microsecond), Due: now,
		}
	}
	return out
}

// OrderKeys returns the distinct order keys of ms, in the order they first
// come: the sequences a transaction reads before it enqueues ms.
func OrderKeys(ms []Stored) []string {
	return distinctKeys(ms, func(m Stored) string { return m.OrderKey })
}

// distinctKeys returns the distinct non-empty order keys of xs, as key
// reads them, in the order they first come.
func distinctKeys[T any](xs []T, key func(T) string) []string {
	var out []string
	for _, x := range xs {
		if k := key(x); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Number gives each ordered message of ms the next place of its order key:
// seqs holds each key's sequence, as it was read in the transaction, and
// is advanced to what the transaction writes back; a key that had no
// messages is due when its first one is. Two transactions that write
// one key's sequence are serialized by the database, so the one that
// commits later numbers its messages after the other's, whatever the
// processes' clocks say.
func Number(ms []Stored, seqs map[string]*Seq) {
	for i := range ms {
		m := &ms[i]
		if m.OrderKey == "" {
			continue
		}
		s := seqs[m.OrderKey]
		s.Last++
		m.Seq = s.Last
		if s.Due.IsZero() {
			s.Due = m.Due
		}
	}
}

// idSep separates the child key from the version in a message's ID.
const idSep = ":"

// ID returns the ID a Take hands a message out with: its child key and
// its version, so that a Settle or a Revive finds the very version taken
// or listed.
func ID(childKey, version string) string { return childKey + idSep + version }

// ParseID splits an ID made by ID.
func ParseID(id string) (childKey, version string, err error) {
	ck, v, ok := strings.Cut(id, idSep)
	if !ok || ck == "" || v == "" {
		return "", "", fmt.Errorf("outbox message ID %.80q is not one this store handed out", id)
	}
	return ck, v, nil
}

// Pending returns m, stored under its child key, as a Take with token
// hands it out at now.
func (m *Stored) Pending(childKey, token string, now time.Time) outbox.Pending {
	return outbox.Pending{
		Message: outbox.Message{
			Topic: m.Topic, Data: m.Data, Attributes: m.Attributes,
			OrderingKey: m.OrderingKey, Name: m.Name,
		},
		ChildKey: childKey,
		ID:       ID(childKey, m.Version),
		Token:    token,
		Waited:   max(now.Sub(m.Enqueued), 0),
		Attempts: int(m.Attempts),
	}
}

// Msg returns m's state, as Take's Planner and Pick need it.
func (m *Stored) Msg() Msg {
	return Msg{OrderKey: m.OrderKey, Seq: m.Seq, Due: m.Due, Dead: !m.Died.IsZero(), Holds: m.Holds}
}

// Head returns m, stored under childKey, as a Take's Planner needs it.
func (m *Stored) Head(childKey string) Head {
	return Head{ID: childKey, Enqueued: m.Enqueued, Msg: m.Msg()}
}

// DeadMessage returns m, dead and stored under its child key, as
// DeadLetters lists it at now.
func (m *Stored) DeadMessage(childKey string, now time.Time) outbox.DeadMessage {
	return outbox.DeadMessage{Pending: m.Pending(childKey, "", now), Reason: m.Reason, Died: m.Died, Holds: m.Holds}
}

// Action is what a Settle does to one message.
type Action struct {
	ChildKey, Version string
	OrderKey          string // as taken
	Token             string // the Take that gave it back
	Sent              bool
	Failure           outbox.Failure // when not Sent
}

// Actions returns what Settle does with sent and failed, one Action per
// message: a message both sent and failed was sent.
func Actions(sent []outbox.Pending, failed []outbox.Failure) ([]Action, error) {
	var out []Action
	at := map[string]int{}
	add := func(p outbox.Pending, a Action) error {
		ck, v, err := ParseID(p.ID)
		if err != nil {
			return err
		}
		a.ChildKey, a.Version, a.Token, a.OrderKey = ck, v, p.Token, outbox.OrderKey(p.Topic, p.OrderingKey)
		if i, ok := at[ck]; ok {
			if a.Sent && out[i].Version == v {
				out[i] = a
			}
			return nil
		}
		at[ck] = len(out)
		out = append(out, a)
		return nil
	}
	for _, p := range sent {
		if err := add(p, Action{Sent: true}); err != nil {
			return nil, err
		}
	}
	for _, f := range failed {
		if err := add(f.Pending, Action{Failure: f}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Apply applies a to m, the message stored under a.ChildKey as Settle's
// transaction read it, at now. It returns del when Settle deletes m,
// write when it rewrites it (m is changed), neither when m is no longer
// the version taken, or no longer held by the Take that failed it.
func (a Action) Apply(m *Stored, now time.Time) (del, write bool) {
	if a.Sent {
		return m.Version == a.Version, false
	}
	if m.Version != a.Version || m.Token != a.Token || !m.Died.IsZero() {
		return false, false
	}
	f := a.Failure
	m.Token = ""
	if f.Reason != "" {
		m.Attempts++
		m.Reason = Cut(f.Reason)
	}
	if f.Dead {
		m.Due, m.Died, m.Holds = Never, now, !f.Release && m.OrderKey != ""
		if f.Release {
			// Out of its key's queries, which read a key's first messages
			// up to a limit: released dead messages must not fill it.
			m.OrderKey = ""
		}
		return false, true
	}
	m.Due = now.Add(max(f.After, 0))
	return false, true
}

// Revive makes m, the message stored under childKey, takeable at now if it
// is the dead version named by id. It reports whether it did: the
// attempts start again from zero and the reason is cleared, as for a
// message never tried (DeadLetters listed them before).
func Revive(m *Stored, version string, now time.Time) bool {
	if m.Version != version || m.Died.IsZero() {
		return false
	}
	m.Due, m.Died, m.Holds, m.Token, m.Attempts, m.Reason = now, time.Time{}, false, "", 0, ""
	m.OrderKey = outbox.OrderKey(m.Topic, m.OrderingKey) // back in its key, at its place
	return true
}

// Cut returns the first MaxReason bytes of reason at most, not splitting
// a UTF-8 sequence.
func Cut(reason string) string {
	if len(reason) <= MaxReason {
		return reason
	}
	n := MaxReason
	for n > 0 && !utf8.RuneStart(reason[n]) {
		n--
	}
	return reason[:n]
}

// sizeSlack is what Size adds to the bytes a message brings: the field
// names (about 100 bytes), a byte per string, the timestamps, integers
// and booleans (about 60 bytes), the 32 bytes each database adds per
// entity or document, and the longest token and reason (27 and 513 bytes)
// that a Take and a failed publish write later. About 750 bytes; 1 KiB
// leaves room.
const sizeSlack = 1024

// Size is an upper bound of the bytes of m as a database sizes it against
// its limits: the name, path or key (name bytes), the attributes as stored
// (attrs bytes), the payload and strings of m, and sizeSlack for the rest.
// It follows Datastore's and Firestore's storage size rules (each string
// its UTF-8 bytes plus one, bytes their length, each number and timestamp
// 8, each entity or document 32), rounded up.
func Size(m *Stored, name, attrs int) int {
	return name + attrs + len(m.Data) + len(m.Topic) + len(m.OrderingKey) + len(m.Name) +
		len(m.OrderKey) + len(m.Version) + sizeSlack
}

// RecordSlack is what CheckSizes leaves of a commit for the record and the
// order keys' sequences that the transaction writes beside the messages.
const RecordSlack = 16 << 10

// ErrTooLarge is matched by the error of a CompleteTx whose messages the
// database could not hold.
var ErrTooLarge = errors.New("outbox: too large for the database")

// CheckSizes refuses ms, sized by size, when one is over entity bytes, or
// all together, with RecordSlack, over commit bytes. what names an entity
// ("entity", "document") and db the database, for the error.
func CheckSizes(ms []Stored, size func(*Stored) int, entity, commit int, what, db string) error {
	total := RecordSlack
	for i := range ms {
		n := size(&ms[i])
		if n > entity {
			return fmt.Errorf("%w: message %d (%.80q): about %d bytes as an outbox %s, over %s's limit of %d bytes per %s", ErrTooLarge, i, ms[i].Name, n, what, db, entity, what)
		}
		total += n
	}
	if total > commit {
		return fmt.Errorf("%w: %d messages of about %d bytes with the record, over %s's limit of %d bytes per commit (the transaction's own writes count too)", ErrTooLarge, len(ms), total, db, commit)
	}
	return nil
}

// StatsScan is how many messages, oldest enqueued first, a Google store's
// Stats reads at most to find the oldest live one past dead ones: beyond
// it, the age of the last read stands for the oldest's (a lower bound).
const StatsScan = 100

// Oldest returns how long the oldest live message of msgs, in enqueue
// order, had waited at now; with none live, zero when msgs holds fewer
// than StatsScan (no message is left to wait), else the age of the last
// of them (a lower bound).
func Oldest(msgs []Stored, now time.Time) time.Duration {
	var age time.Duration
	for _, m := range msgs {
		age = max(now.Sub(m.Enqueued), 0)
		if m.Died.IsZero() {
			return age
		}
	}
	if len(msgs) < StatsScan {
		return 0 // every message read is dead, and none is left: none waits
	}
	return age
}
