package outboxq

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"time"

	"github.com/idemgate/idemgate/outbox"
)

// DB is a Google database's outbox as [Outbox] reads and writes it: the
// queries outside a transaction, and the transaction. Messages are named
// by their child keys, sequences by their order keys.
type DB interface {
	// Free returns up to limit unordered messages due at now, by due,
	// then by enqueue.
	Free(ctx context.Context, now time.Time, limit int) ([]Head, error)
	// First returns the first limit messages of orderKey, by Seq.
	First(ctx context.Context, orderKey string, limit int) ([]Head, error)
	// DueKeys returns up to limit order keys whose sequence is due at
	// now, by due.
	DueKeys(ctx context.Context, now time.Time, limit int) ([]Key, error)
	// Count counts the live messages (due before Never), or the dead.
	Count(ctx context.Context, dead bool) (int64, error)
	// Enqueued calls each with the messages in enqueue order, at most n,
	// until it returns false.
	Enqueued(ctx context.Context, n int, each func(*Stored) bool) error
	// Dead returns up to n dead messages by died, and their child keys.
	Dead(ctx context.Context, n int) ([]string, []*Stored, error)
	// Run runs fn in a transaction and commits its writes. With once it
	// tries once, and a transaction that lost a race returns ErrRace.
	Run(ctx context.Context, once bool, fn func(Tx) error) error
	// Now is the store's clock.
	Now() time.Time
}

// Tx is a transaction of a [DB]. Writes take effect at the commit.
type Tx interface {
	// Get reads the messages of ids (nil for one that does not exist)
	// and the sequences of orderKeys that exist.
	Get(ids, orderKeys []string) ([]*Stored, map[string]*Seq, error)
	// Put writes the state of m, which exists, under id.
	Put(id string, m *Stored) error
	// Delete deletes the message id.
	Delete(id string) error
	// PutSeq writes the sequence of orderKey.
	PutSeq(orderKey string, s *Seq) error
}

// ErrRace is returned by a [DB]'s Run tried once when another
// transaction won.
var ErrRace = errors.New("outboxq: another transaction won")

// Outbox is the outbox algorithm of the Google stores over a [DB]: each
// method implements the relay.Source or relay.DeadLetters method of its
// name.
type Outbox struct{ DB DB }

// Backlog counts the live messages.
func (o Outbox) Backlog(ctx context.Context) (int64, error) { return o.DB.Count(ctx, false) }

// Stats counts the live and the dead messages, and reads at most
// StatsScan messages in enqueue order for the oldest live one.
func (o Outbox) Stats(ctx context.Context) (outbox.Stats, error) {
	var st outbox.Stats
	var err error
	if st.Unsent, err = o.DB.Count(ctx, false); err != nil {
		return outbox.Stats{}, err
	}
	if st.Dead, err = o.DB.Count(ctx, true); err != nil {
		return outbox.Stats{}, err
	}
	if st.Unsent == 0 {
		return st, nil
	}
	var msgs []Stored
	err = o.DB.Enqueued(ctx, StatsScan, func(m *Stored) bool {
		msgs = append(msgs, *m)
		return !m.Died.IsZero()
	})
	if err != nil {
		return outbox.Stats{}, err
	}
	st.Oldest = Oldest(msgs, o.DB.Now())
	return st, nil
}

// Take leases up to limit due messages for lease, in publishing order: a
// plan from the queries, then one transaction tried once that also moves
// the keys' Due on ([Planner.Hints]). A lost race takes none, no error.
func (o Outbox) Take(ctx context.Context, limit int, lease time.Duration) ([]outbox.Pending, error) {
	if limit <= 0 {
		return nil, nil
	}
	now := o.DB.Now()
	plan := NewPlanner(limit, now, func(orderKey string) ([]Head, error) {
		return o.DB.First(ctx, orderKey, limit)
	})
	free, err := o.DB.Free(ctx, now, limit)
	if err != nil {
		return nil, err
	}
	keys, err := o.DB.DueKeys(ctx, now, KeyLimit(limit))
	if err != nil {
		return nil, err
	}
	if err := plan.Plan(free, keys); err != nil {
		return nil, err
	}
	ids, heads := plan.IDs(), plan.Heads()
	if len(ids) == 0 && len(plan.Keys()) == 0 {
		return nil, nil
	}
	read := append(slices.Clip(ids), heads...)
	token := rand.Text()
	var out []outbox.Pending
	err = o.DB.Run(ctx, true, func(tx Tx) error {
		out = out[:0]
		got, seqs, err := tx.Get(read, plan.Keys())
		if err != nil {
			return err
		}
		msgs := make([]*Msg, len(got))
		for i, m := range got {
			if m != nil { // else sent and deleted since the query
				mm := m.Msg()
				msgs[i] = &mm
			}
		}
		blocking := map[string]*Msg{}
		for i, h := range heads {
			blocking[h] = msgs[len(ids)+i]
		}
		now := o.DB.Now()
		var took []*Msg
		for _, i := range Pick(msgs[:len(ids)], now) {
			m := got[i]
			m.Due, m.Token = now.Add(lease), token
			if err := tx.Put(ids[i], m); err != nil {
				return err
			}
			out = append(out, m.Pending(ids[i], token, now))
			took = append(took, msgs[i])
		}
		return putSeqs(tx, seqs, plan.Hints(seqs, blocking, took, now, lease))
	})
	if errors.Is(err, ErrRace) {
		return nil, nil // another relay's transaction won: poll again
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func putSeqs(tx Tx, seqs map[string]*Seq, keys []string) error {
	for _, k := range keys {
		if err := tx.PutSeq(k, seqs[k]); err != nil {
			return err
		}
	}
	return nil
}

// Settle, in one transaction, deletes each sent message still of the
// version taken, applies each failure to the message the same Take holds
// ([Action.Apply]), and lowers their keys' sequences ([Settle]).
func (o Outbox) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	acts, err := Actions(sent, failed)
	if err != nil || len(acts) == 0 {
		return err
	}
	ids := make([]string, len(acts))
	for i, a := range acts {
		ids[i] = a.ChildKey
	}
	orderKeys := SettleKeys(acts)
	return o.DB.Run(ctx, false, func(tx Tx) error {
		got, seqs, err := tx.Get(ids, orderKeys)
		if err != nil {
			return err
		}
		dels, writes, changed := Settle(acts, got, seqs, o.DB.Now())
		for _, i := range dels {
			if err := tx.Delete(ids[i]); err != nil {
				return err
			}
		}
		for _, i := range writes {
			if err := tx.Put(ids[i], got[i]); err != nil {
				return err
			}
		}
		return putSeqs(tx, seqs, changed)
	})
}

// Dead lists up to n dead messages, oldest first.
func (o Outbox) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	if n <= 0 {
		return nil, nil
	}
	ids, msgs, err := o.DB.Dead(ctx, n)
	if err != nil {
		return nil, err
	}
	now := o.DB.Now()
	out := make([]outbox.DeadMessage, len(msgs))
	for i, m := range msgs {
		out[i] = m.DeadMessage(ids[i], now)
	}
	return out, nil
}

// Revive, in one transaction, makes the dead messages of ids takeable and
// their keys due, skipping one not dead or written anew since listed. It
// returns how many it revived.
func (o Outbox) Revive(ctx context.Context, ids ...string) (int, error) {
	var cks, versions []string
	for _, id := range ids {
		ck, v, err := ParseID(id)
		if err != nil || slices.Contains(cks, ck) {
			continue // names no message of ours, or named already
		}
		cks, versions = append(cks, ck), append(versions, v)
	}
	if len(cks) == 0 {
		return 0, nil
	}
	var n int
	err := o.DB.Run(ctx, false, func(tx Tx) error {
		n = 0
		got, _, err := tx.Get(cks, nil)
		if err != nil {
			return err
		}
		now := o.DB.Now()
		var revived []Stored
		var at []int
		for i, m := range got {
			if m != nil && Revive(m, versions[i], now) {
				revived, at = append(revived, *m), append(at, i)
			}
		}
		if len(at) == 0 {
			return nil
		}
		// Every read before the first write: the sequences of their keys.
		_, seqs, err := tx.Get(nil, OrderKeys(revived))
		if err != nil {
			return err
		}
		for _, i := range at {
			if err := tx.Put(cks[i], got[i]); err != nil {
				return err
			}
		}
		n = len(at)
		return putSeqs(tx, seqs, Revived(revived, seqs, now))
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
