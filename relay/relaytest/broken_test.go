package relaytest

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
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

// bugs switches on one deliberate violation of the source contract each.
type bugs struct {
	ignoresHold       bool // Take hands out held messages
	ignoresOrder      bool // Take hands out a key's message past a held earlier one
	keepsSent         bool // Settle does not delete the sent messages
	givesBackAny      bool // Settle gives back messages another Take holds now
	enqueuesRollback  bool // messages are written at once, not on commit
	enqueuesFenced    bool // messages commit even when the claim was fenced out
	noChildKeyAttr    bool // the child key is not among the attributes
	leaseNeverLapses  bool // a dead relay's messages are never handed out again
	settleKeepsLapsed bool // Settle of a message whose lease lapsed deletes nothing
	windowFirst       bool // Take fills its window first, then drops rows behind a held one
	rawTopic          bool // a key's order goes by the topic as spelled
	noBackoff         bool // a failure is given back at once, whatever After says
	countsUntried     bool // a failure without a reason is counted
	takesDead         bool // a dead message is taken again
	deadNeverHolds    bool // a dead message never holds its key
	backlogCountsDead bool // Backlog counts dead messages
	reviveKeepsCount  bool // Revive keeps the attempts
	settleByChildKey  bool // Settle deletes every message of a sent child key
	releasedFill      bool // dead messages that released their key still fill a Take's window
	statsAgesDead     bool // Stats ages the oldest message, dead or not
	scanCountsBlocked bool // Take scans 4n due rows, those behind a blocked key counted
}

// model is a small, obviously correct outbox (one mutex) over memstore,
// with switchable bugs.
type model struct {
	mu     sync.Mutex // guards rows, nextID
	rows   []*row     // in id order
	nextID int64
	bugs   bugs
}

type row struct {
	id         int64
	p          outbox.Pending
	enqueued   time.Time
	leaseUntil time.Time // held, or backing off, until then
	taker      string
	reason     string
	died       time.Time // zero: alive
	holds      bool      // dead, and its key's later messages wait
}

// order is what orders r among the others: its order key, "" for none.
func (m *model) order(r *row) string {
	if m.bugs.rawTopic && r.p.OrderingKey != "" {
		return r.p.Topic + "\x00" + r.p.OrderingKey
	}
	return outbox.OrderKey(r.p.Topic, r.p.OrderingKey)
}

func (m *model) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	token := rand.Text()
	blocked := map[string]bool{}
	var out []outbox.Pending
	window, released, scanned := 0, 0, 0
	for _, r := range m.rows {
		if len(out) == n || m.bugs.windowFirst && window == n || m.bugs.scanCountsBlocked && scanned == 4*n {
			break
		}
		k := m.order(r)
		if m.bugs.releasedFill && !r.died.IsZero() && !r.holds && k != "" {
			released++
			if len(out)+released >= n {
				break
			}
		}
		dead := !r.died.IsZero() && !m.bugs.takesDead
		held := now.Before(r.leaseUntil) && !m.bugs.leaseNeverLapses || m.bugs.leaseNeverLapses && r.taker != ""
		if dead || held && !m.bugs.ignoresHold {
			if k != "" && (held || r.holds && !m.bugs.deadNeverHolds) {
				blocked[k] = true
			}
			continue
		}
		window++
		scanned++
		if k != "" && blocked[k] && !m.bugs.ignoresOrder {
			continue
		}
		r.leaseUntil, r.taker = now.Add(lease), token
		p := r.p
		p.Token, p.Waited = token, now.Sub(r.enqueued)
		out = append(out, p)
	}
	return out, nil
}

func (m *model) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for _, p := range sent {
		for i := 0; i < len(m.rows); i++ {
			r := m.rows[i]
			match := r.p.ID == p.ID || m.bugs.settleByChildKey && r.p.ChildKey == p.ChildKey
			if match && !m.bugs.keepsSent && (!m.bugs.settleKeepsLapsed || r.taker == p.Token && now.Before(r.leaseUntil)) {
				m.rows = append(m.rows[:i], m.rows[i+1:]...)
				i--
			}
		}
	}
	for _, f := range failed {
		for _, r := range m.rows {
			if r.p.ID != f.ID || r.taker != f.Token && !m.bugs.givesBackAny {
				continue
			}
			r.leaseUntil, r.taker = time.Time{}, ""
			if f.Reason != "" || m.bugs.countsUntried {
				r.p.Attempts++
				r.reason = f.Reason
			}
			if !m.bugs.noBackoff {
				r.leaseUntil = now.Add(f.After)
			}
			if f.Dead {
				r.died, r.holds = now, !f.Release
			}
		}
	}
	return nil
}

func (m *model) Backlog(ctx context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, r := range m.rows {
		if r.died.IsZero() || m.bugs.backlogCountsDead {
			n++
		}
	}
	return n, nil
}

func (m *model) Stats(ctx context.Context) (outbox.Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var st outbox.Stats
	for _, r := range m.rows {
		if !r.died.IsZero() {
			st.Dead++
		} else {
			st.Unsent++
		}
		if st.Oldest == 0 && (r.died.IsZero() || m.bugs.statsAgesDead) {
			st.Oldest = time.Since(r.enqueued)
		}
	}
	return st, nil
}

func (m *model) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []outbox.DeadMessage
	for _, r := range m.rows {
		if !r.died.IsZero() && len(out) < n {
			p := r.p
			p.Waited = time.Since(r.enqueued)
			out = append(out, outbox.DeadMessage{Pending: p, Reason: r.reason, Died: r.died, Holds: r.holds})
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
		if !r.died.IsZero() && slices.Contains(ids, r.p.ID) {
			r.died, r.holds, r.leaseUntil, r.taker = time.Time{}, false, time.Time{}, ""
			if !m.bugs.reviveKeepsCount {
				r.p.Attempts = 0
			}
			n++
		}
	}
	return n, nil
}

// add commits prepared messages.
func (m *model) add(ps []outbox.Pending) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		m.nextID++
		p.ID = strconv.FormatInt(m.nextID, 10)
		if m.bugs.noChildKeyAttr {
			delete(p.Attributes, outbox.ChildKeyAttribute)
		}
		m.rows = append(m.rows, &row{id: m.nextID, p: p, enqueued: time.Now()})
	}
}

var (
	_ relay.Source      = (*model)(nil)
	_ relay.DeadLetters = (*model)(nil)
)

// modelEnv returns an env on a model with b; its InTx completes on commit
// with memstore's Complete, the model's stand-in for CompleteTx.
func modelEnv(t testing.TB, b bugs) *env {
	st, err := memstore.New(&memstore.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m := &model{bugs: b}
	cfg := Config{Lease: 100 * time.Millisecond}
	cfg.InTx = func(ctx context.Context, _ store.Store, fn func(complete CompleteFunc) error) error {
		type pending struct {
			c  store.Claim
			ps []outbox.Pending
		}
		var buf []pending
		err := fn(func(c store.Claim, msgs ...outbox.Message) error {
			ps, err := outbox.Prepare(c.Key, msgs)
			if err != nil {
				return err
			}
			if b.enqueuesRollback {
				m.add(ps)
				ps = nil
			}
			buf = append(buf, pending{c, ps})
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range buf {
			ok, err := st.Complete(ctx, p.c)
			if err != nil {
				return err
			}
			if !ok && !b.enqueuesFenced {
				return fmt.Errorf("model: %w", store.ErrFenced)
			}
			m.add(p.ps)
		}
		return nil
	}
	return &env{cfg: cfg, ctx: t.Context(), st: st, src: m}
}

// recorder is a testing.TB that records failures instead of failing the
// test; FailNow ends the case's goroutine.
type recorder struct {
	testing.TB
	mu     sync.Mutex // guards failed
	failed bool
}

func (r *recorder) Errorf(format string, args ...any) { r.fail() }
func (r *recorder) Error(args ...any)                 { r.fail() }
func (r *recorder) Fatalf(format string, args ...any) { r.fail(); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.fail(); runtime.Goexit() }
func (r *recorder) FailNow()                          { r.fail(); runtime.Goexit() }
func (r *recorder) Fail()                             { r.fail() }
func (r *recorder) Failed() bool                      { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recorder) Helper()                           {}
func (r *recorder) Logf(format string, args ...any)   {}
func (r *recorder) Log(args ...any)                   {}
func (r *recorder) fail()                             { r.mu.Lock(); r.failed = true; r.mu.Unlock() }

// failures runs the source cases on a model with b and returns the names
// of those that failed.
func failures(t *testing.T, b bugs) []string {
	var failed []string
	for _, c := range sourceCases {
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.run(r, modelEnv(r, b))
		}()
		<-done
		if r.Failed() {
			failed = append(failed, c.name)
		}
	}
	return failed
}

// TestSuiteCatchesBrokenSources runs the source cases on a correct model,
// which must pass them all, and on models with one bug each, which must
// fail at least one.
func TestSuiteCatchesBrokenSources(t *testing.T) {
	if got := failures(t, bugs{}); len(got) > 0 {
		t.Fatalf("the correct model fails %v", got)
	}
	for name, b := range map[string]bugs{
		"ignoresHold":       {ignoresHold: true},
		"ignoresOrder":      {ignoresOrder: true},
		"keepsSent":         {keepsSent: true},
		"givesBackAny":      {givesBackAny: true},
		"enqueuesRollback":  {enqueuesRollback: true},
		"enqueuesFenced":    {enqueuesFenced: true},
		"noChildKeyAttr":    {noChildKeyAttr: true},
		"leaseNeverLapses":  {leaseNeverLapses: true},
		"settleKeepsLapsed": {settleKeepsLapsed: true},
		"windowFirst":       {windowFirst: true},
		"rawTopic":          {rawTopic: true},
		"noBackoff":         {noBackoff: true},
		"countsUntried":     {countsUntried: true},
		"takesDead":         {takesDead: true},
		"deadNeverHolds":    {deadNeverHolds: true},
		"backlogCountsDead": {backlogCountsDead: true},
		"reviveKeepsCount":  {reviveKeepsCount: true},
		"settleByChildKey":  {settleByChildKey: true},
		"releasedFill":      {releasedFill: true},
		"statsAgesDead":     {statsAgesDead: true},
		"scanCountsBlocked": {scanCountsBlocked: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := failures(t, b); len(got) == 0 {
				t.Errorf("no source case catches %s", name)
			} else {
				t.Logf("caught by %v", got)
			}
		})
	}
}
