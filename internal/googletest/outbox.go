package googletest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/internal/fakeclock"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
)

// OutboxWorld is a store and its outbox for the outbox cases.
type OutboxWorld struct {
	Store  Store
	Source relay.Source
	// Complete runs a transaction that calls the store's CompleteTx with c
	// and msgs and then returns fail: nil commits, anything else rolls
	// back. It returns the transaction's error.
	Complete func(ctx context.Context, c store.Claim, fail error, msgs ...outbox.Message) error
}

// NewOutboxWorld returns a fresh store, whose records and outbox no other
// store sees, on the clock now.
type NewOutboxWorld func(t *testing.T, now func() time.Time) OutboxWorld

// Outbox runs the outbox cases: messages commit with CompleteTx and only
// then, carry their child keys, are handed to one Take at a time, in
// order per ordering key, and leave the outbox once settled as sent.
func Outbox(t *testing.T, newWorld NewOutboxWorld) {
	const lease = 10 * time.Second
	setup := func(t *testing.T) (OutboxWorld, *fakeclock.Clock, context.Context) {
		clk := fakeclock.New()
		return newWorld(t, clk.Now), clk, t.Context()
	}
	claim := func(t *testing.T, w OutboxWorld, key string) store.Claim {
		t.Helper()
		return claimWon(t, w, key, lease)
	}
	backlog := func(t *testing.T, w OutboxWorld) int64 {
		t.Helper()
		n, err := w.Source.Backlog(t.Context())
		if err != nil {
			t.Fatalf("Backlog: %v", err)
		}
		return n
	}
	take := func(t *testing.T, w OutboxWorld, n int) []outbox.Pending {
		t.Helper()
		return takeN(t, w, n, lease)
	}

	t.Run("commit", func(t *testing.T) {
		w, _, ctx := setup(t)
		c := claim(t, w, "order-1")
		msgs := []outbox.Message{
			{Topic: "shipments", Data: []byte("ship 1"), Attributes: map[string]string{"order_id": "1"}},
			{Topic: "invoices", Data: []byte("bill 1"), Name: "invoice"},
		}
		if err := w.Complete(ctx, c, nil, msgs...); err != nil {
			t.Fatalf("CompleteTx in a committed transaction: %v", err)
		}
		if got := backlog(t, w); got != 2 {
			t.Fatalf("backlog after a commit with 2 messages = %d, want 2", got)
		}
		ps := take(t, w, 10)
		if len(ps) != 2 {
			t.Fatalf("Take returned %d messages, want the 2 committed", len(ps))
		}
		for i, want := range []struct{ name, topic, data string }{{"0", "shipments", "ship 1"}, {"invoice", "invoices", "bill 1"}} {
			p := ps[i]
			ck := outbox.ChildKey(c.Key, want.name)
			if p.Name != want.name || p.Topic != want.topic || string(p.Data) != want.data || p.ChildKey != ck || p.Attributes[outbox.ChildKeyAttribute] != ck {
				t.Errorf("message %d = %+v; want name %q, topic %q, data %q and child key %s in its attributes", i, p, want.name, want.topic, want.data, ck)
			}
		}
		if ps[0].Attributes["order_id"] != "1" {
			t.Errorf("message 0 lost its attribute order_id: %v", ps[0].Attributes)
		}
		if err := w.Source.Settle(ctx, ps, nil); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		if got := backlog(t, w); got != 0 {
			t.Errorf("backlog after settling every message as sent = %d, want 0", got)
		}
	})

	t.Run("rollback", func(t *testing.T) {
		w, _, ctx := setup(t)
		c := claim(t, w, "order-2")
		boom := errors.New("the ledger write failed")
		if err := w.Complete(ctx, c, boom, outbox.Message{Topic: "shipments"}); !errors.Is(err, boom) {
			t.Fatalf("transaction = %v, want the body's error", err)
		}
		if got := backlog(t, w); got != 0 {
			t.Errorf("a rolled-back transaction left %d messages in the outbox, want 0", got)
		}
	})

	t.Run("fenced", func(t *testing.T) {
		w, clk, ctx := setup(t)
		old := claim(t, w, "order-3")
		clk.Advance(lease + time.Second)
		claim(t, w, "order-3") // the zombie's claim is taken over
		err := w.Complete(ctx, old, nil, outbox.Message{Topic: "shipments"})
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("CompleteTx of a taken-over claim = %v, want ErrFenced", err)
		}
		if got := backlog(t, w); got != 0 {
			t.Errorf("a fenced-out holder left %d messages in the outbox, want 0", got)
		}
	})

	t.Run("invalid", func(t *testing.T) {
		w, _, ctx := setup(t)
		c := claim(t, w, "order-4")
		if err := w.Complete(ctx, c, nil, outbox.Message{Topic: ""}); err == nil {
			t.Fatal("CompleteTx with a message without a topic committed")
		}
		if got := backlog(t, w); got != 0 {
			t.Errorf("an invalid message left %d messages in the outbox, want 0", got)
		}
	})

	t.Run("leases", func(t *testing.T) {
		w, clk, ctx := setup(t)
		c := claim(t, w, "order-5")
		if err := w.Complete(ctx, c, nil, outbox.Message{Topic: "shipments"}); err != nil {
			t.Fatal(err)
		}
		first := take(t, w, 10)
		if len(first) != 1 {
			t.Fatalf("Take = %d messages, want 1", len(first))
		}
		if again := take(t, w, 10); len(again) != 0 {
			t.Fatalf("a second Take while the first holds the message returned %d, want none", len(again))
		}
		// Given back: at once for the next Take.
		if err := w.Source.Settle(ctx, nil, untried(first)); err != nil {
			t.Fatal(err)
		}
		second := take(t, w, 10)
		if len(second) != 1 || second[0].ChildKey != first[0].ChildKey {
			t.Fatalf("Take after the message was given back = %v, want it again", second)
		}
		// The holder dies: after its lease the message goes to another
		// Take, with the same child key, and the dead holder's give-back
		// no longer applies.
		clk.Advance(lease + time.Second)
		third := take(t, w, 10)
		if len(third) != 1 || third[0].ChildKey != first[0].ChildKey || third[0].Token == second[0].Token {
			t.Fatalf("Take after the lease lapsed = %v, want the message under a new token", third)
		}
		if err := w.Source.Settle(ctx, nil, untried(second)); err != nil {
			t.Fatal(err)
		}
		if again := take(t, w, 10); len(again) != 0 {
			t.Fatalf("a stale Take's give-back released a message another Take holds: %v", again)
		}
		// A message published by a holder whose lease lapsed is sent all
		// the same.
		if err := w.Source.Settle(ctx, second, nil); err != nil {
			t.Fatal(err)
		}
		if got := backlog(t, w); got != 0 {
			t.Errorf("backlog after the sent message was settled = %d, want 0", got)
		}
	})

	t.Run("ordering", func(t *testing.T) {
		w, clk, ctx := setup(t)
		m := func(key, name string) outbox.Message {
			return outbox.Message{Topic: "shipments", OrderingKey: key, Name: name, Data: []byte(name)}
		}
		if err := w.Complete(ctx, claim(t, w, "a"), nil, m("k", "k1"), m("k", "k2"), m("", "free1")); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
		if err := w.Complete(ctx, claim(t, w, "b"), nil, m("k", "k3"), m("j", "j1")); err != nil {
			t.Fatal(err)
		}
		names := func(ps []outbox.Pending) []string {
			var out []string
			for _, p := range ps {
				out = append(out, p.Name)
			}
			return out
		}
		// One message at a time: the first Take gets k1 only; k's later
		// messages wait behind it.
		first := take(t, w, 1)
		if got := names(first); !slices.Equal(got, []string{"k1"}) {
			t.Fatalf("Take(1) = %v, want [k1]", got)
		}
		rest := take(t, w, 10)
		if got := names(rest); slices.Contains(got, "k2") || slices.Contains(got, "k3") || !slices.Contains(got, "free1") || !slices.Contains(got, "j1") {
			t.Fatalf("Take while k1 is held = %v, want free1 and j1 but nothing of key k", got)
		}
		if err := w.Source.Settle(ctx, first, nil); err != nil {
			t.Fatal(err)
		}
		if got := names(take(t, w, 10)); !slices.Equal(got, []string{"k2", "k3"}) {
			t.Fatalf("Take after k1 was sent = %v, want [k2 k3] in order", got)
		}
	})
}

// PubSubClient returns a client on the Pub/Sub emulator, in a project of
// t's own, closed when t ends: relaytest.Config.PubSub.
func PubSubClient(t *testing.T) *pubsub.Client {
	t.Helper()
	host := testenv.PubSubEmulatorHost(t)
	c, err := pubsub.NewClient(t.Context(), testenv.PubSubProject(t), testenv.PubSubClientOptions(host)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// untried gives ps back as messages a relay did not try to publish.
func untried(ps []outbox.Pending) []outbox.Failure {
	out := make([]outbox.Failure, len(ps))
	for i, p := range ps {
		out[i] = outbox.Failure{Pending: p}
	}
	return out
}

// claimWon claims key in w's store for lease, failing t unless it wins.
func claimWon(t *testing.T, w OutboxWorld, key string, lease time.Duration) store.Claim {
	t.Helper()
	c, err := w.Store.Claim(t.Context(), key, lease, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim(%q) = %v, %v; want Won", key, c.Status, err)
	}
	return c
}

// takeN takes up to n messages from w's outbox for lease, failing t on an
// error.
func takeN(t *testing.T, w OutboxWorld, n int, lease time.Duration) []outbox.Pending {
	t.Helper()
	ps, err := w.Source.Take(t.Context(), n, lease)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return ps
}
