// Package relaytest is the conformance suite of outbox stores: of their
// CompleteTx with messages, and of the relay.Source they implement. Every
// store with an outbox runs it:
//
//	func TestOutbox(t *testing.T) {
//		relaytest.Run(t, relaytest.Config{
//			New: func(t testing.TB) (store.Store, relay.Source) {
//				st := newStoreWithFreshOutbox(t)
//				return st, st.Outbox()
//			},
//			InTx: func(ctx context.Context, st store.Store, fn func(complete relaytest.CompleteFunc) error) error {
//				… begin tx; err := fn(func(c store.Claim, msgs ...outbox.Message) error {
//					return st.(*mystore.Store).CompleteTx(ctx, tx, c, msgs...)
//				}); commit when err == nil, else roll back …
//			},
//			PubSub: client, // on the Pub/Sub emulator
//		})
//	}
//
// The source cases need no Pub/Sub: messages commit only with their
// transaction, carry their child key, are held from other Takes until
// their lease lapses or Settle gives them back, keep each ordering key's
// order (a blocked key never stalls another), back off, die, and revive.
// The relay cases run real relays on Config.PubSub (two at once, one that
// dies, ordered keys), and the limit cases on a pstest server of their
// own: a slow Pub/Sub, and requests it refuses whole. docs/design.md
// ("Exactly-once pipelines") maps the cases to the rules they hold.
//
// The source cases are themselves tested against a model source with one
// deliberate bug at a time: each bug fails at least one case.
package relaytest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
)

// CompleteFunc completes c with msgs in the transaction InTx runs: the
// store's CompleteTx, with the transaction bound.
type CompleteFunc func(c store.Claim, msgs ...outbox.Message) error

// Config is what the suite needs of a store.
type Config struct {
	// New returns a store and its outbox, both fresh for the test and
	// empty (a table, kind or collection of its own), with a ttl over a
	// minute: the cases claim with one-minute leases. Required.
	New func(t testing.TB) (store.Store, relay.Source)

	// InTx runs fn in a new transaction of st's database, which commits
	// when fn returns nil and rolls back otherwise; complete is st's
	// CompleteTx in that transaction. It returns fn's error, or the
	// commit's. Required.
	InTx func(ctx context.Context, st store.Store, fn func(complete CompleteFunc) error) error

	// PubSub is a client on the Pub/Sub emulator (or a test project) for
	// the relay cases, which create topics and subscriptions of unique
	// names in its project. Nil skips them.
	PubSub *pubsub.Client

	// Lease is the short lease of the cases that wait for one to lapse.
	// Default 300ms.
	Lease time.Duration

	// Wakes says that the source is a relay.Waker whose Listen works on
	// this backend: the suite then checks that a relay polling once an
	// hour still publishes a committed message within seconds.
	Wakes bool
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.New == nil || cfg.InTx == nil {
		t.Fatal("relaytest: Config.New and Config.InTx are required")
	}
	if cfg.Lease == 0 {
		cfg.Lease = 300 * time.Millisecond
	}
	for _, c := range sourceCases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newEnv(t, cfg))
		})
	}
	for _, c := range slices.Concat(relayCases, limitCases) {
		t.Run(c.name, func(t *testing.T) {
			if cfg.PubSub == nil {
				t.Skip("relaytest: Config.PubSub is nil")
			}
			c.run(t, newEnv(t, cfg))
		})
	}
	if cfg.Wakes {
		t.Run("ListenWakesRelay", func(t *testing.T) {
			if cfg.PubSub == nil {
				t.Skip("relaytest: Config.PubSub is nil")
			}
			listenWakesRelay(t, newEnv(t, cfg))
		})
	}
}

// testCase is one case of the suite.
type testCase struct {
	name string
	run  func(t testing.TB, e *env)
}

// env is one case's store and outbox.
type env struct {
	cfg Config
	ctx context.Context
	st  store.Store
	src relay.Source
	n   int // keys claimed so far
}

func newEnv(t testing.TB, cfg Config) *env {
	st, src := cfg.New(t)
	return &env{cfg: cfg, ctx: t.Context(), st: st, src: src}
}

// claim wins a fresh key.
func (e *env) claim(t testing.TB) store.Claim {
	t.Helper()
	e.n++
	key := fmt.Sprintf("relaytest-%d", e.n)
	c, err := e.st.Claim(e.ctx, key, time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim(%q) = %+v, %v; want Won", key, c, err)
	}
	return c
}

// enqueue claims a fresh key and commits msgs with its completion. It
// returns the claim.
func (e *env) enqueue(t testing.TB, msgs ...outbox.Message) store.Claim {
	t.Helper()
	c := e.claim(t)
	if err := e.cfg.InTx(e.ctx, e.st, func(complete CompleteFunc) error { return complete(c, msgs...) }); err != nil {
		t.Fatalf("CompleteTx with %d messages in a transaction that commits: %v", len(msgs), err)
	}
	return c
}

// take takes up to n messages for lease.
func (e *env) take(t testing.TB, n int, lease time.Duration) []outbox.Pending {
	t.Helper()
	got, err := e.src.Take(e.ctx, n, lease)
	if err != nil {
		t.Fatalf("Take(%d, %v): %v", n, lease, err)
	}
	return got
}

// settle settles a Take.
func (e *env) settle(t testing.TB, sent, unsent []outbox.Pending) {
	t.Helper()
	if err := e.src.Settle(e.ctx, sent, untried(unsent)); err != nil {
		t.Fatalf("Settle(%d sent, %d unsent): %v", len(sent), len(unsent), err)
	}
}

// backlog fails t unless the backlog is want.
func (e *env) backlog(t testing.TB, want int64, rule string) {
	t.Helper()
	n, err := e.src.Backlog(e.ctx)
	if err != nil {
		t.Fatalf("Backlog: %v", err)
	}
	if n != want {
		t.Errorf("%s: Backlog = %d, want %d", rule, n, want)
	}
}

// untried gives ps back as messages a relay did not try to publish.
func untried(ps []outbox.Pending) []outbox.Failure {
	out := make([]outbox.Failure, len(ps))
	for i, p := range ps {
		out[i] = outbox.Failure{Pending: p}
	}
	return out
}

// childKeys lists the child keys of ps.
func childKeys(ps []outbox.Pending) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ChildKey
	}
	return out
}

// until polls cond until it holds or d passes.
func until(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // polling a real condition, with a deadline
	}
}
