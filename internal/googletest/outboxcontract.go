package googletest

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/fakeclock"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
)

// NewOutboxWorlds returns one store per clock, all on one fresh outbox
// (one namespace, or one collection) and with SkewMargin skew, as
// processes whose clocks differ share a database.
type NewOutboxWorlds func(t *testing.T, skew time.Duration, clocks ...func() time.Time) []OutboxWorld

// OutboxLimits are a store's limits on what one CompleteTx writes, as its
// errors name them.
type OutboxLimits struct {
	Entity int // bytes of one message's entity or document
	Commit int // bytes of one commit
}

// OutboxSource runs the cases of the relay.Source contract that the
// Google stores had wrong, beyond relaytest's (which both run): a message
// the database cannot hold, a key's order decided by the completing
// processes' clocks, and the failures a relay reports (attempts, backoff
// on the store's clock, dead messages).
func OutboxSource(t *testing.T, newWorlds NewOutboxWorlds, limits OutboxLimits) {
	const lease = 10 * time.Second
	one := func(t *testing.T) (OutboxWorld, *fakeclock.Clock) {
		clk := fakeclock.New()
		return newWorlds(t, 0, clk.Now)[0], clk
	}
	claim := func(t *testing.T, w OutboxWorld, key string) store.Claim {
		t.Helper()
		return claimWon(t, w, key, lease)
	}
	complete := func(t *testing.T, w OutboxWorld, key string, msgs ...outbox.Message) store.Claim {
		t.Helper()
		c := claim(t, w, key)
		if err := w.Complete(t.Context(), c, nil, msgs...); err != nil {
			t.Fatalf("CompleteTx(%q): %v", key, err)
		}
		return c
	}
	take := func(t *testing.T, w OutboxWorld, n int) []outbox.Pending {
		t.Helper()
		return takeN(t, w, n, lease)
	}
	settle := func(t *testing.T, w OutboxWorld, sent []outbox.Pending, failed ...outbox.Failure) {
		t.Helper()
		if err := w.Source.Settle(t.Context(), sent, failed); err != nil {
			t.Fatalf("Settle: %v", err)
		}
	}
	backlog := func(t *testing.T, w OutboxWorld, want int64, why string) {
		t.Helper()
		if n, err := w.Source.Backlog(t.Context()); err != nil || n != want {
			t.Errorf("Backlog = %d, %v; want %d: %s", n, err, want, why)
		}
	}
	names := func(ps []outbox.Pending) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	// refused checks that a CompleteTx of msgs fails naming limit, and
	// leaves the claim and an empty outbox behind.
	refused := func(t *testing.T, limit int, msgs ...outbox.Message) {
		w, _ := one(t)
		c := claim(t, w, "big")
		err := w.Complete(t.Context(), c, nil, msgs...)
		if err == nil || !strings.Contains(err.Error(), strconv.Itoa(limit)) {
			t.Fatalf("CompleteTx of %d messages of %d bytes = %v; want a refusal naming the limit of %d bytes", len(msgs), len(msgs[0].Data), err, limit)
		}
		rec, live, err := w.Store.(store.Inspector).Inspect(t.Context(), c.Key)
		if err != nil || !live || rec.State != store.Claimed || rec.Fence != c.Fence {
			t.Errorf("record after the refusal = %+v (live %v, %v), want the claim's, CLAIMED", rec, live, err)
		}
		backlog(t, w, 0, "a refused CompleteTx writes no message")
	}

	// Item 1: Prepare admits up to the Pub/Sub client's 10 MB, the
	// database holds less.
	t.Run("EntityLimit", func(t *testing.T) {
		refused(t, limits.Entity, outbox.Message{Topic: "shipments", Data: bytes.Repeat([]byte{'x'}, 2<<20)})
	})
	t.Run("CommitLimit", func(t *testing.T) {
		msgs := make([]outbox.Message, 11)
		for i := range msgs {
			msgs[i] = outbox.Message{Topic: "shipments", Data: bytes.Repeat([]byte{'x'}, 1_000_000)}
		}
		refused(t, limits.Commit, msgs...)
	})

	// Item 4: process A's clock is ahead of B's, within the margin. A
	// commits first, then B, on one ordering key: A's message goes first.
	t.Run("OrderAcrossSkewedClocks", func(t *testing.T) {
		clk := fakeclock.New()
		ahead := func() time.Time { return clk.Now().Add(500 * time.Millisecond) }
		ws := newWorlds(t, time.Second, ahead, clk.Now)
		a, b := ws[0], ws[1]
		complete(t, a, "from-a", outbox.Message{Topic: "shipments", OrderingKey: "k", Name: "a"})
		complete(t, b, "from-b", outbox.Message{Topic: "projects/p/topics/shipments", OrderingKey: "k", Name: "b"})
		clk.Advance(time.Second) // both due on either clock
		for i, w := range ws {
			if got := names(take(t, w, 10)); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("Take from store %d = %v, want [a b]: A committed first, whatever the clocks say", i, got)
			}
			clk.Advance(lease + 2*time.Second) // the lease lapses: the next store takes them again
		}
	})

	// Item 2: attempts, reason, backoff on the store's clock, dead
	// messages that hold their key unless released, revival.
	t.Run("Failures", func(t *testing.T) {
		w, clk := one(t)
		k := func(name string) outbox.Message {
			return outbox.Message{Topic: "shipments", OrderingKey: "k", Name: name}
		}
		complete(t, w, "order-1", k("k1"), k("k2"), outbox.Message{Topic: "invoices", Name: "f1"})
		got := take(t, w, 10)
		if !slices.Equal(names(got), []string{"k1", "k2", "f1"}) {
			t.Fatalf("Take = %v, want [k1 k2 f1]", names(got))
		}
		k1, k2, f1 := got[0], got[1], got[2]
		settle(t, w, nil,
			outbox.Failure{Pending: k1, Reason: "boom", After: 5 * time.Second},
			outbox.Failure{Pending: k2}, // not tried: not counted
			outbox.Failure{Pending: f1, Reason: "refused"})
		if got := take(t, w, 10); !slices.Equal(names(got), []string{"f1"}) || got[0].Attempts != 1 {
			t.Fatalf("Take while k1 backs off = %v, want [f1] with 1 attempt: k2 waits behind k1", names(got))
		} else {
			f1 = got[0]
		}
		long := strings.Repeat("é", 300) // 600 bytes
		settle(t, w, nil, outbox.Failure{Pending: f1, Reason: long, Dead: true})
		clk.Advance(4 * time.Second)
		if got := take(t, w, 10); len(got) != 0 {
			t.Fatalf("Take a second before k1's backoff ends = %v, want none", names(got))
		}
		clk.Advance(2 * time.Second)
		got = take(t, w, 10)
		if !slices.Equal(names(got), []string{"k1", "k2"}) || got[0].Attempts != 1 || got[1].Attempts != 0 {
			t.Fatalf("Take after the backoff = %+v, want k1 (1 attempt) then k2 (0)", got)
		}
		k1, k2 = got[0], got[1]
		settle(t, w, nil, outbox.Failure{Pending: k1, Reason: "gone", Dead: true}, outbox.Failure{Pending: k2})
		if got := take(t, w, 10); len(got) != 0 {
			t.Fatalf("Take behind a dead k1 that holds its key = %v, want none", names(got))
		}
		backlog(t, w, 1, "dead messages are not counted, k2 is")
		dl, ok := w.Source.(relay.DeadLetters)
		if !ok {
			t.Fatalf("%T does not implement relay.DeadLetters", w.Source)
		}
		dead, err := dl.Dead(t.Context(), 10)
		if err != nil || len(dead) != 2 {
			t.Fatalf("Dead = %+v, %v; want f1 and k1", dead, err)
		}
		if d := dead[0]; d.Name != "f1" || d.Attempts != 2 || len(d.Reason) > 512 || !strings.HasPrefix(long, d.Reason) || len(d.Reason) < 500 || d.Token != "" {
			t.Errorf("first dead = %+v, want f1, 2 attempts, its reason cut to 512 bytes, no token", d)
		}
		if d := dead[1]; d.Name != "k1" || d.Attempts != 2 || d.Reason != "gone" || !d.Holds || !d.Died.After(dead[0].Died) || d.Waited < 6*time.Second {
			t.Errorf("second dead = %+v, want k1, 2 attempts, reason gone, holding its key, died after f1, committed 6s ago", d)
		}
		if n, err := dl.Revive(t.Context(), dead[1].ID, "no-such-id"); err != nil || n != 1 {
			t.Fatalf("Revive(k1, unknown) = %d, %v; want 1", n, err)
		}
		got = take(t, w, 10)
		if !slices.Equal(names(got), []string{"k1", "k2"}) || got[0].Attempts != 0 {
			t.Fatalf("Take after k1 was revived = %+v, want k1 (attempts counted from 0) then k2", got)
		}
		k1, k2 = got[0], got[1]
		settle(t, w, nil, outbox.Failure{Pending: k1, Reason: "gone again", Dead: true, Release: true}, outbox.Failure{Pending: k2})
		if got := take(t, w, 10); !slices.Equal(names(got), []string{"k2"}) {
			t.Fatalf("Take behind a released dead k1 = %v, want [k2]", names(got))
		} else {
			settle(t, w, got)
		}
		backlog(t, w, 0, "only dead messages are left")
		dead, err = dl.Dead(t.Context(), 1)
		if err != nil || len(dead) != 1 || dead[0].Name != "f1" {
			t.Fatalf("Dead(1) = %+v, %v; want the oldest, f1", dead, err)
		}
		dead, err = dl.Dead(t.Context(), 10)
		if err != nil || len(dead) != 2 || dead[1].Name != "k1" || dead[1].Holds {
			t.Errorf("Dead = %+v, %v; want f1 then k1, which no longer holds its key", dead, err)
		}
		if n, err := dl.Revive(t.Context(), dead[0].ID, dead[0].ID); err != nil || n != 1 {
			t.Errorf("Revive(f1, f1) = %d, %v; want 1", n, err)
		}
		if got := take(t, w, 10); !slices.Equal(names(got), []string{"f1"}) {
			t.Errorf("Take after f1 was revived = %v, want [f1]", names(got))
		}
		if n, err := dl.Revive(t.Context(), dead[0].ID); err != nil || n != 0 {
			t.Errorf("Revive of a live message = %d, %v; want 0", n, err)
		}
	})
}
