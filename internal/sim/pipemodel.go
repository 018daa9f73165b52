package sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// ModelOutbox is the pipeline family's model of a store's outbox: a
// relay.Source and relay.DeadLetters that meets the Source contract (S1 to
// S7 of issue 29) in the plainest way, one mutex over a list of rows, and
// a CompleteTx modelled on memstore's records. It runs the family without
// a database; the stores' own outboxes run it in real time.
type ModelOutbox struct {
	st *memstore.Store

	mu    sync.Mutex // guards rows, next and takes
	rows  []*modelRow
	next  int64
	takes int64
}

type modelRow struct {
	id       int64
	p        outbox.Pending
	order    string // outbox.OrderKey
	enqueued time.Time
	held     time.Time // the lease's end; zero when free
	token    string
	after    time.Time // a backoff's end
	attempts int
	reason   string
	dead     bool
	died     time.Time
	holds    bool
}

// NewModelOutbox returns an empty model outbox over a fresh memstore whose
// records live ttl.
func NewModelOutbox(ttl time.Duration) *ModelOutbox {
	st, err := memstore.New(&memstore.Options{TTL: ttl})
	if err != nil {
		panic("sim: memstore.New: " + err.Error())
	}
	return &ModelOutbox{st: st}
}

// Store is the memstore that holds the model's records.
func (m *ModelOutbox) Store() *memstore.Store { return m.st }

// CompleteTx completes c with msgs as one transaction: prepared first (a
// message Prepare refuses fails it, nothing written), then, when commit is
// true, the record DONE and the messages enqueued in one step, or nothing
// when c no longer owns its record (store.ErrFenced). commit false is a
// rollback: nothing is written.
func (m *ModelOutbox) CompleteTx(ctx context.Context, c store.Claim, msgs []outbox.Message, commit bool) error {
	ps, err := outbox.Prepare(c.Key, msgs)
	if err != nil {
		return err
	}
	if !commit {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ok, err := m.st.Complete(ctx, c)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("model outbox: %w", store.ErrFenced)
	}
	now := time.Now()
	for _, p := range ps {
		m.next++
		p.ID = strconv.FormatInt(m.next, 10)
		m.rows = append(m.rows, &modelRow{id: m.next, p: p, order: outbox.OrderKey(p.Topic, p.OrderingKey), enqueued: now})
	}
	return nil
}

// Take implements relay.Source.
func (m *ModelOutbox) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	if n <= 0 {
		return nil, fmt.Errorf("model outbox: take %d", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.takes++
	token := "take-" + strconv.FormatInt(m.takes, 10)
	blocked := map[string]bool{}
	var out []outbox.Pending
	for _, r := range m.rows {
		if len(out) == n {
			break
		}
		if r.order != "" && blocked[r.order] {
			continue
		}
		busy := now.Before(r.held) || now.Before(r.after) || r.dead
		if busy {
			if r.order != "" && (!r.dead || r.holds) {
				blocked[r.order] = true
			}
			continue
		}
		r.held, r.token = now.Add(lease), token
		p := r.p
		p.Token, p.Waited, p.Attempts = token, now.Sub(r.enqueued), r.attempts
		out = append(out, p)
	}
	return out, nil
}

// Settle implements relay.Source.
func (m *ModelOutbox) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	gone := map[string]bool{}
	for _, p := range sent {
		gone[p.ID] = true
	}
	m.rows = slices.DeleteFunc(m.rows, func(r *modelRow) bool { return gone[r.p.ID] })
	for _, f := range failed {
		for _, r := range m.rows {
			if r.p.ID != f.ID || r.token != f.Token || r.dead || f.Token == "" {
				continue
			}
			if f.Reason != "" {
				r.attempts++
				r.reason = f.Reason
				if len(r.reason) > 512 {
					r.reason = r.reason[:512]
				}
			}
			r.held, r.token = time.Time{}, ""
			r.after = now.Add(f.After)
			if f.Dead {
				r.dead, r.died, r.holds = true, now, !f.Release
			}
		}
	}
	return nil
}

// Backlog implements relay.Source: the live rows, held or not.
func (m *ModelOutbox) Backlog(ctx context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, r := range m.rows {
		if !r.dead {
			n++
		}
	}
	return n, nil
}

// Dead implements relay.DeadLetters.
func (m *ModelOutbox) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	var out []outbox.DeadMessage
	for _, r := range m.rows {
		if r.dead {
			p := r.p
			p.Token, p.Waited, p.Attempts = "", now.Sub(r.enqueued), r.attempts
			out = append(out, outbox.DeadMessage{Pending: p, Reason: r.reason, Died: r.died, Holds: r.holds})
		}
	}
	slices.SortStableFunc(out, func(a, b outbox.DeadMessage) int { return a.Died.Compare(b.Died) })
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// Revive implements relay.DeadLetters; the reason is kept.
func (m *ModelOutbox) Revive(ctx context.Context, ids ...string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.rows {
		if r.dead && slices.Contains(ids, r.p.ID) {
			r.dead, r.holds, r.attempts, r.after, r.held, r.token = false, false, 0, time.Time{}, time.Time{}, ""
			n++
		}
	}
	return n, nil
}

var (
	_ relay.Source      = (*ModelOutbox)(nil)
	_ relay.DeadLetters = (*ModelOutbox)(nil)
)
