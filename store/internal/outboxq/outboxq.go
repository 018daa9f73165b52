// Package outboxq is the outbox of the Google stores, written once: the
// algorithm ([Outbox]: Take, Settle, Stats, Dead, Revive) over a [DB] each
// store implements with its queries and transactions, and the rules of
// storing, taking, settling and sizing a message.
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
// and Backlog counts only the messages due before it. Both databases keep
// timestamps up to the end of year 9999.
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

// Pick returns the indexes of msgs (in Plan's order; nil for one gone)
// that a Take takes at now, in publishing order: an order key's messages
// by Seq at the place of its first. It takes each due, live message, but
// none of a key after one that is held, backs off, or is dead and holds
// the key; a dead message that released its key blocks nothing.
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

// Queued returns ps, prepared by [outbox.Prepare], as a transaction
// stores them at now: due at once, each with its own version. Number
// gives them their places.
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

// OrderKeys returns the distinct order keys of ms, in first-come order:
// the sequences a transaction reads before it enqueues ms.
func OrderKeys(ms []Stored) []string {
	return distinctKeys(ms, func(m Stored) string { return m.OrderKey })
}

// distinctKeys returns the distinct non-empty keys of xs, in first-come order.
func distinctKeys[T any](xs []T, key func(T) string) []string {
	var out []string
	for _, x := range xs {
		if k := key(x); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Number gives each ordered message of ms the next place of its order key,
// advancing seqs (as read in the transaction) to what it writes back. The
// database serializes two transactions writing one key's sequence, so the
// later numbers after the other, whatever the processes' clocks say.
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
// version, so a Settle or a Revive finds the very version taken or listed.
func ID(childKey, version string) string { return childKey + idSep + version }

// ParseID splits an ID made by ID.
func ParseID(id string) (childKey, version string, err error) {
	ck, v, ok := strings.Cut(id, idSep)
	if !ok || ck == "" || v == "" {
		return "", "", fmt.Errorf("outbox message ID %.80q is not one this store handed out", id)
	}
	return ck, v, nil
}

// Pending returns m as a Take with token hands it out at now.
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

// Head returns m as a Take's Planner needs it.
func (m *Stored) Head(childKey string) Head {
	return Head{ID: childKey, Enqueued: m.Enqueued, Msg: m.Msg()}
}

// DeadMessage returns m, dead, as DeadLetters lists it at now.
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

// Apply applies a at now to m as Settle's transaction read it: del when
// Settle deletes m, write when it rewrites it, neither when m is no longer
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
			// Out of its key's queries, which read up to a limit.
			m.OrderKey = ""
		}
		return false, true
	}
	m.Due = now.Add(max(f.After, 0))
	return false, true
}

// Revive makes m takeable at now, as a message never tried, if it is the
// dead version named; it reports whether it did.
func Revive(m *Stored, version string, now time.Time) bool {
	if m.Version != version || m.Died.IsZero() {
		return false
	}
	m.Due, m.Died, m.Holds, m.Token, m.Attempts, m.Reason = now, time.Time{}, false, "", 0, ""
	m.OrderKey = outbox.OrderKey(m.Topic, m.OrderingKey) // back in its key, at its place
	return true
}

// Cut returns at most MaxReason bytes of reason, on a rune boundary.
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

// sizeSlack is what Size adds for the field names, the fixed-size values,
// the 32 bytes per entity, and the longest token and reason written later:
// about 750 bytes.
const sizeSlack = 1024

// Size is an upper bound of m's bytes by Datastore's and Firestore's
// storage size rules, given its name's and stored attributes' bytes.
func Size(m *Stored, name, attrs int) int {
	return name + attrs + len(m.Data) + len(m.Topic) + len(m.OrderingKey) + len(m.Name) +
		len(m.OrderKey) + len(m.Version) + sizeSlack
}

// RecordSlack is what CheckSizes leaves of a commit for the record and the
// sequences written beside the messages.
const RecordSlack = 16 << 10

// ErrTooLarge is matched by the error of a CompleteTx whose messages the
// database could not hold.
var ErrTooLarge = errors.New("outbox: too large for the database")

// CheckSizes refuses ms when one is over entity bytes, or all with
// RecordSlack over commit bytes; what and db name them in the error.
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

// StatsScan is how many messages, oldest first, Stats reads at most to
// find the oldest live one past dead ones.
const StatsScan = 100

// Oldest returns how long the oldest live message of msgs (in enqueue
// order) had waited at now; with none live, zero for fewer than StatsScan,
// else the last one's age, a lower bound.
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
