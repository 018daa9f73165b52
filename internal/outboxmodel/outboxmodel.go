// Package outboxmodel is the one in-memory model of a store's outbox: a
// relay.Source and relay.DeadLetters that meets the Source contract in the
// plainest way, one mutex over a list of rows, with a CompleteTx modelled
// on memstore's records. The relay's tests and the simulator's pipeline
// family run on it without a database; it records every Settle for the
// tests to read.
package outboxmodel

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// Outbox is the model. It is safe for concurrent use.
type Outbox struct {
	st *memstore.Store

	mu      sync.Mutex // guards the fields below
	rows    []*row
	next    int64
	takes   int64
	settles []Settled
	changed chan struct{} // closed and replaced at each Take, Settle and Revive
}

type row struct {
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

// Settled is one Settle call.
type Settled struct {
	Sent   []outbox.Pending
	Failed []outbox.Failure
}

var (
	_ relay.Source      = (*Outbox)(nil)
	_ relay.DeadLetters = (*Outbox)(nil)
)

// New returns an empty model outbox over a fresh memstore whose records
// live ttl.
func New(ttl time.Duration) *Outbox {
	st, err := memstore.New(&memstore.Options{TTL: ttl})
	if err != nil {
		panic("outboxmodel: memstore.New: " + err.Error())
	}
	return &Outbox{st: st, changed: make(chan struct{})}
}

// Store is the memstore that holds the model's records.
func (m *Outbox) Store() *memstore.Store { return m.st }

// CompleteTx completes c with msgs as one transaction: prepared first (a
// message Prepare refuses fails it, nothing written), then, when commit is
// true, the record DONE and the messages enqueued in one step, or nothing
// when c no longer owns its record (store.ErrFenced). commit false is a
// rollback: nothing is written.
func (m *Outbox) CompleteTx(ctx context.Context, c store.Claim, msgs []outbox.Message, commit bool) error {
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
	for i := range ps {
		m.enqueue(&ps[i], 0)
	}
	return nil
}

// Add enqueues msgs under parent as if committed, each as failed attempts
// times already, and returns them with their IDs.
func (m *Outbox) Add(t testing.TB, parent string, attempts int, msgs ...outbox.Message) []outbox.Pending {
	t.Helper()
	ps, err := outbox.Prepare(parent, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		m.AddPending(&ps[i], attempts)
	}
	return ps
}

// AddPending enqueues p as it is (a test can make messages Prepare
// refuses) and sets its ID.
func (m *Outbox) AddPending(p *outbox.Pending, attempts int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.enqueue(p, attempts)
}

// enqueue appends p and sets its ID; m.mu is held.
func (m *Outbox) enqueue(p *outbox.Pending, attempts int) {
	m.next++
	p.ID = strconv.FormatInt(m.next, 10)
	m.rows = append(m.rows, &row{p: *p, order: outbox.OrderKey(p.Topic, p.OrderingKey), enqueued: time.Now(), attempts: attempts})
}

// signal wakes the waiters of Await; m.mu is held.
func (m *Outbox) signal() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Take implements relay.Source.
func (m *Outbox) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	if n <= 0 {
		return nil, fmt.Errorf("model outbox: take %d", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.signal()
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
		if now.Before(r.held) || now.Before(r.after) || r.dead {
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

// Settle implements relay.Source; an ended ctx fails it, as a store's
// query.
func (m *Outbox) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.signal()
	now := time.Now()
	m.settles = append(m.settles, Settled{slices.Clone(sent), slices.Clone(failed)})
	gone := map[string]bool{}
	for _, p := range sent {
		gone[p.ID] = true
	}
	m.rows = slices.DeleteFunc(m.rows, func(r *row) bool { return gone[r.p.ID] })
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
func (m *Outbox) Backlog(ctx context.Context) (int64, error) {
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
func (m *Outbox) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
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
func (m *Outbox) Revive(ctx context.Context, ids ...string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.signal()
	n := 0
	for _, r := range m.rows {
		if r.dead && slices.Contains(ids, r.p.ID) {
			r.dead, r.holds, r.attempts, r.after, r.held, r.token = false, false, 0, time.Time{}, time.Time{}, ""
			n++
		}
	}
	return n, nil
}

// Calls returns the Settle calls so far.
func (m *Outbox) Calls() []Settled {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.settles)
}

// Failures returns every Failure settled so far.
func (m *Outbox) Failures() []outbox.Failure {
	var out []outbox.Failure
	for _, c := range m.Calls() {
		out = append(out, c.Failed...)
	}
	return out
}

// Present reports whether the message of id is still in the outbox.
func (m *Outbox) Present(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.ContainsFunc(m.rows, func(r *row) bool { return r.p.ID == id })
}

// Await waits until cond holds, looking again after each Take, Settle
// and Revive; it fails t after d.
func (m *Outbox) Await(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		ch := m.changed
		m.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}
