package sqlstore_test

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// failAll gives ps back as failed with reason, to be taken again after.
func failAll(ps []outbox.Pending, reason string, after time.Duration) []outbox.Failure {
	out := make([]outbox.Failure, len(ps))
	for i, p := range ps {
		out[i] = outbox.Failure{Pending: p, Reason: reason, After: after}
	}
	return out
}

// A batch of messages that fail at the head of the outbox, given back
// with a backoff, does not keep the healthy messages after them from
// being taken; the failures are counted.
func TestOutboxPoisonHeadDoesNotStarve(t *testing.T) {
	const batch = 4
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newObEnv(t, b)
			var poison []outbox.Message
			for range batch {
				poison = append(poison, outbox.Message{Topic: "gone", Data: []byte("poison")})
			}
			e.enqueue(t, poison...)
			e.enqueue(t, msg("ok-1", ""), msg("ok-2", "k"), msg("ok-3", "k"))

			head := e.take(t, batch)
			if !slices.Equal(data(head), []string{"poison", "poison", "poison", "poison"}) {
				t.Fatalf("first Take(%d) = %q, want the poison head", batch, data(head))
			}
			e.settle(t, nil, failAll(head, "NotFound: topic gone", time.Hour)...)
			if got := e.take(t, batch); !slices.Equal(data(got), []string{"ok-1", "ok-2", "ok-3"}) {
				t.Fatalf("Take(%d) after the head failed with a backoff = %q; want the healthy messages", batch, data(got))
			}
			e.backlog(t, batch+3, "messages backing off and held are live")
			for _, p := range head {
				w, err := sqlstore.OutboxWait(t.Context(), e.st, p.ID)
				if err != nil {
					t.Fatal(err)
				}
				if w <= 59*time.Minute || w > time.Hour {
					t.Errorf("message %s waits %v on the database's clock after a failure with After 1h", p.ID, w)
				}
			}
		})
	}
}

// Each failure with a reason counts once, in the next Take's Attempts; a
// message given back untried counts nothing; After 0 takes it again at
// once; a failure from another Take than the holder's changes nothing.
func TestOutboxAttempts(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newObEnv(t, b)
			e.enqueue(t, msg("a", "k"), msg("b", "k"))
			attempts := func(ps []outbox.Pending) []int {
				out := make([]int, len(ps))
				for i, p := range ps {
					out[i] = p.Attempts
				}
				return out
			}
			got := e.take(t, 10)
			if w := attempts(got); !slices.Equal(w, []int{0, 0}) {
				t.Fatalf("Attempts of fresh messages = %v, want [0 0]", w)
			}
			e.settle(t, nil, outbox.Failure{Pending: got[0], Reason: "unavailable"}, outbox.Failure{Pending: got[1]})
			got = e.take(t, 10)
			if w := attempts(got); !slices.Equal(data(got), []string{"a", "b"}) || !slices.Equal(w, []int{1, 0}) {
				t.Fatalf("after one failure with a reason and one without: took %q with Attempts %v; want [a b], [1 0]", data(got), w)
			}
			e.settle(t, nil, failAll(got, "deadline exceeded", 0)...)
			got = e.take(t, 10)
			if w := attempts(got); !slices.Equal(w, []int{2, 1}) {
				t.Fatalf("after a second round of failures: Attempts %v; want [2 1]", w)
			}

			stranger := got[0]
			stranger.Token = "another-take"
			e.settle(t, nil, outbox.Failure{Pending: stranger, Reason: "stale", Dead: true})
			if again := e.take(t, 10); len(again) != 0 {
				t.Errorf("a failure settled by another Take ended the holder's lease: took %q", data(again))
			}
			if dead, err := e.ob.Dead(t.Context(), 10); err != nil || len(dead) != 0 {
				t.Errorf("a failure settled by another Take killed the message: Dead = %d messages, %v", len(dead), err)
			}
		})
	}
}

// Dead messages stay, out of the backlog, listed oldest death first with
// their reason; a holding one keeps its key's later messages behind it, a
// released one does not; Revive makes them takeable at once with no
// attempts, and counts only dead messages.
func TestOutboxDeadLetters(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newObEnv(t, b)
			e.enqueue(t, msg("a", "k"), msg("b", "k"), msg("u", "u"), msg("v", "u"), msg("c", ""))
			got := e.take(t, 10)
			if !slices.Equal(data(got), []string{"a", "b", "u", "v", "c"}) {
				t.Fatalf("Take = %q", data(got))
			}
			a, bb, u, v, c := got[0], got[1], got[2], got[3], got[4]

			e.settle(t, nil, outbox.Failure{Pending: u, Reason: "u refused", Dead: true, Release: true}, outbox.Failure{Pending: v})
			first, err := e.ob.Dead(ctx, 10)
			if err != nil || len(first) != 1 {
				t.Fatalf("Dead after one death = %d messages, %v", len(first), err)
			}
			// a dies after u on the database's clock, which counts in ms.
			for {
				now, err := e.st.Now(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if now.After(first[0].Died) {
					break
				}
			}
			long := strings.Repeat("é", 400) // 800 bytes
			e.settle(t, nil, outbox.Failure{Pending: a, Reason: long, Dead: true}, outbox.Failure{Pending: bb}, outbox.Failure{Pending: c})

			if got := e.take(t, 10); !slices.Equal(data(got), []string{"v", "c"}) {
				t.Fatalf("Take with a dead holding message before b and a released one before v = %q; want [v c]", data(got))
			}
			e.backlog(t, 3, "dead messages are not in the backlog")

			dead, err := e.ob.Dead(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(deadData(dead), []string{"u", "a"}) {
				t.Fatalf("Dead = %q; want [u a], the oldest death first", deadData(dead))
			}
			du, da := dead[0], dead[1]
			switch {
			case du.ID != u.ID || du.Reason != "u refused" || du.Holds || du.Attempts != 1 || du.Token != "" || du.ChildKey != u.ChildKey:
				t.Errorf("dead released message = %+v; want ID %s, reason kept, Holds false, Attempts 1, no token", du, u.ID)
			case da.ID != a.ID || !da.Holds || da.Attempts != 1:
				t.Errorf("dead holding message = ID %s Holds %v Attempts %d; want ID %s, Holds, Attempts 1", da.ID, da.Holds, da.Attempts, a.ID)
			case !du.Died.Before(da.Died):
				t.Errorf("Died %v, %v: want the order of the deaths", du.Died, da.Died)
			case len(da.Reason) > 512 || !utf8.ValidString(da.Reason) || !strings.HasPrefix(long, da.Reason) || len(da.Reason) < 510:
				t.Errorf("a reason of %d bytes kept as %d bytes (valid UTF-8 %v); want it cut to at most 512, between characters",
					len(long), len(da.Reason), utf8.ValidString(da.Reason))
			}
			if one, err := e.ob.Dead(ctx, 1); err != nil || !slices.Equal(deadData(one), []string{"u"}) {
				t.Errorf("Dead(1) = %q, %v; want [u]", deadData(one), err)
			}

			n, err := e.ob.Revive(ctx, a.ID, "not-an-id", "999999999", bb.ID)
			if err != nil || n != 1 {
				t.Fatalf("Revive(dead a, two unknown IDs, live b) = %d, %v; want 1", n, err)
			}
			got = e.take(t, 10)
			if !slices.Equal(data(got), []string{"a", "b"}) || got[0].Attempts != 0 {
				t.Fatalf("Take after Revive(a) = %q (a's Attempts %d); want [a b], a's attempts counted from 0", data(got), got[0].Attempts)
			}
			if n, err := e.ob.Revive(ctx, a.ID); err != nil || n != 0 {
				t.Errorf("Revive of a message no longer dead = %d, %v; want 0", n, err)
			}
			if n, err := e.ob.Revive(ctx, u.ID); err != nil || n != 1 {
				t.Fatalf("Revive(u) = %d, %v; want 1", n, err)
			}
			if got := e.take(t, 10); !slices.Equal(data(got), []string{"u"}) {
				t.Errorf("Take after Revive(u) = %q; want [u]", data(got))
			}
			e.backlog(t, 5, "revived messages are live")
			if dead, err := e.ob.Dead(ctx, 10); err != nil || len(dead) != 0 {
				t.Errorf("Dead after reviving both = %q, %v; want none", deadData(dead), err)
			}
		})
	}
}

// deadData lists the payloads of ds, as strings.
func deadData(ds []outbox.DeadMessage) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Data)
	}
	return out
}
