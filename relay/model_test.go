package relay_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
)

// model is an in-memory Source that keeps the contract's rules on the
// real clock (a message held, backing off or dead is not taken; a key's
// messages wait behind its held, backing-off or holding dead one) and
// records every Settle: the relay's decisions, for the tests to read.
type model struct {
	mu      sync.Mutex // guards the fields below
	rows    []*row
	next    int
	takes   int
	settles []settled
	changed chan struct{} // closed and replaced at each Take and Settle
}

// row is one message of a model.
type row struct {
	p        outbox.Pending
	enqueued time.Time
	token    string
	until    time.Time // the lease's end
	after    time.Time // the backoff's end
	dead     bool
	release  bool
	died     time.Time
	attempts int
	reason   string
}

// settled is one Settle call.
type settled struct {
	sent   []outbox.Pending
	failed []outbox.Failure
}

var (
	_ relay.Source      = (*model)(nil)
	_ relay.DeadLetters = (*model)(nil)
)

func newModel() *model { return &model{changed: make(chan struct{})} }

// add enqueues msgs under parent, each as failed attempts times already.
func (m *model) add(t testing.TB, parent string, attempts int, msgs ...outbox.Message) []outbox.Pending {
	t.Helper()
	ps, err := outbox.Prepare(parent, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		m.addPending(&ps[i], attempts)
	}
	return ps
}

// addPending enqueues p as it is (the tests make messages Prepare refuses).
func (m *model) addPending(p *outbox.Pending, attempts int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	p.ID = fmt.Sprint(m.next)
	m.rows = append(m.rows, &row{p: *p, enqueued: time.Now(), attempts: attempts})
}

// signal wakes the waiters; m.mu is held.
func (m *model) signal() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *model) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.takes++
	token := fmt.Sprint("take-", m.takes)
	blocked := map[string]bool{}
	var out []outbox.Pending
	for _, r := range m.rows {
		ok := outbox.OrderKey(r.p.Topic, r.p.OrderingKey)
		switch {
		case r.dead:
			if !r.release && ok != "" {
				blocked[ok] = true
			}
			continue
		case r.token != "" && now.Before(r.until), now.Before(r.after), ok != "" && blocked[ok], len(out) == n:
			if ok != "" {
				blocked[ok] = true
			}
			continue
		}
		r.token, r.until = token, now.Add(lease)
		p := r.p
		p.Token, p.Attempts, p.Waited = token, r.attempts, now.Sub(r.enqueued)
		out = append(out, p)
	}
	m.signal()
	return out, nil
}

func (m *model) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	if err := ctx.Err(); err != nil {
		return err // as a store's query on an ended ctx
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.settles = append(m.settles, settled{slices.Clone(sent), slices.Clone(failed)})
	for _, p := range sent {
		m.rows = slices.DeleteFunc(m.rows, func(r *row) bool { return r.p.ID == p.ID })
	}
	for _, f := range failed {
		for _, r := range m.rows {
			if r.p.ID != f.ID || r.token != f.Token || !now.Before(r.until) {
				continue
			}
			r.token = ""
			if f.Reason != "" {
				r.attempts++
				r.reason = f.Reason
			}
			r.after = now.Add(f.After)
			if f.Dead {
				r.dead, r.release, r.died = true, f.Release, now
			}
		}
	}
	m.signal()
	return nil
}

func (m *model) Backlog(ctx context.Context) (int64, error) {
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

func (m *model) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []outbox.DeadMessage
	for _, r := range m.rows {
		if r.dead && len(out) < n {
			p := r.p
			p.Attempts, p.Waited = r.attempts, time.Since(r.enqueued)
			out = append(out, outbox.DeadMessage{Pending: p, Reason: r.reason, Died: r.died, Holds: !r.release})
		}
	}
	slices.SortStableFunc(out, func(a, b outbox.DeadMessage) int { return a.Died.Compare(b.Died) })
	return out, nil
}

func (m *model) Revive(ctx context.Context, ids ...string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.rows {
		if r.dead && slices.Contains(ids, r.p.ID) {
			r.dead, r.release, r.attempts, r.after = false, false, 0, time.Time{}
			n++
		}
	}
	m.signal()
	return n, nil
}

// calls returns the Settle calls so far.
func (m *model) calls() []settled {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.settles)
}

// await waits until cond holds of m, failing t after d.
func (m *model) await(t testing.TB, d time.Duration, what string, cond func() bool) {
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

// failures returns every Failure settled so far.
func (m *model) failures() []outbox.Failure {
	var out []outbox.Failure
	for _, c := range m.calls() {
		out = append(out, c.failed...)
	}
	return out
}

// present reports whether the message of id is still in the outbox.
func (m *model) present(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.ContainsFunc(m.rows, func(r *row) bool { return r.p.ID == id })
}
