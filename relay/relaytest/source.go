package relaytest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
)

// sourceCases need no Pub/Sub.
var sourceCases = []testCase{
	{"CommitCarriesMessages", commitCarriesMessages},
	{"RollbackLeavesNothing", rollbackLeavesNothing},
	{"FencedOutLeavesNothing", fencedOutLeavesNothing},
	{"RefusedMessageSendsNothing", refusedMessageSendsNothing},
	{"TakeHoldsUntilSettled", takeHoldsUntilSettled},
	{"LapsedLeaseHandsOutAgain", lapsedLeaseHandsOutAgain},
	{"OrderingKeyWaitsForHeld", orderingKeyWaitsForHeld},
	{"ConcurrentTakesKeepOrder", concurrentTakesKeepOrder},
	{"TakeFillsPastBlockedKey", takeFillsPastBlockedKey},
	{"BlockedKeyDoesNotStallOthers", blockedKeyDoesNotStallOthers},
	{"TopicSpellingsShareOrder", topicSpellingsShareOrder},
	{"FailureBacksOff", failureBacksOff},
	{"PoisonDoesNotStarveOthers", poisonDoesNotStarveOthers},
	{"DeadKeptListedRevived", deadKeptListedRevived},
	{"DeadReleaseLetsKeyPass", deadReleaseLetsKeyPass},
	{"ReleasedDeadDoNotFillWindow", releasedDeadDoNotFillWindow},
	{"SettleKeepsRewrittenMessage", settleKeepsRewrittenMessage},
	{"StatsCountAndAge", statsCountAndAge},
}

func commitCarriesMessages(t testing.TB, e *env) {
	msgs := []outbox.Message{
		{Topic: "orders-out", Data: []byte("one"), Attributes: map[string]string{"a": "1"}, OrderingKey: "k1"},
		{Topic: "projects/p-1/topics/other", Data: nil, Name: "named"},
		{Topic: "orders-out", Data: []byte{0, 255, 1}},
	}
	c := e.enqueue(t, msgs...)
	got := e.take(t, 10, time.Minute)
	if len(got) != len(msgs) {
		t.Fatalf("a committed CompleteTx with %d messages must leave them all to take: took %d", len(msgs), len(got))
	}
	names := []string{"0", "named", "2"}
	for i, p := range got {
		m := msgs[i]
		ck := outbox.ChildKey(c.Key, names[i])
		wantAttrs := map[string]string{outbox.ChildKeyAttribute: ck}
		for k, v := range m.Attributes {
			wantAttrs[k] = v
		}
		switch {
		case p.Topic != m.Topic || p.OrderingKey != m.OrderingKey || string(p.Data) != string(m.Data):
			t.Errorf("message %d: took topic %q, ordering key %q, data %q; want %q, %q, %q (messages come out as enqueued, oldest first)",
				i, p.Topic, p.OrderingKey, p.Data, m.Topic, m.OrderingKey, m.Data)
		case p.ChildKey != ck:
			t.Errorf("message %d: child key %q, want outbox.ChildKey(claim key, %q) = %q", i, p.ChildKey, names[i], ck)
		case p.ID == "" || p.Token == "":
			t.Errorf("message %d: ID %q, Token %q; a taken message must have both", i, p.ID, p.Token)
		case p.Waited < 0 || p.Waited > time.Hour:
			t.Errorf("message %d: Waited %v; want the short time since its commit", i, p.Waited)
		}
		if diff := cmp.Diff(wantAttrs, p.Attributes); diff != "" {
			t.Errorf("message %d: attributes (-want +got), the child key must be among them:\n%s", i, diff)
		}
	}
	if msgs[0].Attributes["a"] != "1" || len(msgs[0].Attributes) != 1 {
		t.Errorf("CompleteTx changed the caller's attributes: %v", msgs[0].Attributes)
	}
	e.backlog(t, 3, "three committed, unsent messages")
	e.settle(t, got, nil)
	e.backlog(t, 0, "sent messages are deleted")
	if again := e.take(t, 10, time.Minute); len(again) != 0 {
		t.Errorf("sent messages must not be handed out again: took %v", childKeys(again))
	}
}

var errRollback = errors.New("relaytest: the transaction fails after CompleteTx")

func rollbackLeavesNothing(t testing.TB, e *env) {
	c := e.claim(t)
	err := e.cfg.InTx(e.ctx, e.st, func(complete CompleteFunc) error {
		if err := complete(c, outbox.Message{Topic: "orders-out", Data: []byte("x")}); err != nil {
			return fmt.Errorf("CompleteTx: %w", err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v, want the body's error", err)
	}
	e.backlog(t, 0, "a rolled-back CompleteTx must enqueue nothing")
	if got := e.take(t, 10, time.Minute); len(got) != 0 {
		t.Fatalf("a rolled-back CompleteTx must enqueue nothing: took %v", childKeys(got))
	}
	// The claim is still the holder's: completing it again commits.
	e.enqueueWith(t, c, outbox.Message{Topic: "orders-out", Data: []byte("x")})
	if got := e.take(t, 10, time.Minute); len(got) != 1 {
		t.Fatalf("after a rollback, the next transaction's messages must commit once: took %d", len(got))
	}
}

// enqueueWith commits msgs with c's completion.
func (e *env) enqueueWith(t testing.TB, c store.Claim, msgs ...outbox.Message) {
	t.Helper()
	if err := e.cfg.InTx(e.ctx, e.st, func(complete CompleteFunc) error { return complete(c, msgs...) }); err != nil {
		t.Fatalf("CompleteTx with %d messages in a transaction that commits: %v", len(msgs), err)
	}
}

func fencedOutLeavesNothing(t testing.TB, e *env) {
	c := e.claim(t)
	if err := e.st.Release(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	next, err := e.st.Claim(e.ctx, c.Key, time.Minute, store.ClaimOptions{})
	if err != nil || next.Status != store.Won {
		t.Fatalf("Claim after Release = %+v, %v; want Won", next, err)
	}
	err = e.cfg.InTx(e.ctx, e.st, func(complete CompleteFunc) error {
		return complete(c, outbox.Message{Topic: "orders-out", Data: []byte("zombie")})
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("CompleteTx of a fenced-out claim = %v, want store.ErrFenced", err)
	}
	e.backlog(t, 0, "a fenced-out CompleteTx must enqueue nothing")
	e.enqueueWith(t, next, outbox.Message{Topic: "orders-out", Data: []byte("holder")})
	got := e.take(t, 10, time.Minute)
	if len(got) != 1 || string(got[0].Data) != "holder" {
		t.Fatalf("only the holder's message may commit: took %d messages", len(got))
	}
	// Same key, same name: the zombie's message, had it committed, would
	// have carried the same child key, so downstream would drop it.
	if got[0].ChildKey != outbox.ChildKey(c.Key, "0") {
		t.Errorf("child key %q is not derived from the claim's key and name", got[0].ChildKey)
	}
}

func refusedMessageSendsNothing(t testing.TB, e *env) {
	bad := [][]outbox.Message{
		{{Topic: ""}},
		{{Topic: "ok-topic", Attributes: map[string]string{"googfoo": "x"}}},
		{{Topic: "ok-topic", Attributes: map[string]string{outbox.ChildKeyAttribute: "forged"}}},
		{{Topic: "ok-topic", Name: "a"}, {Topic: "ok-topic", Name: "a"}},
		{{Topic: "ok-topic"}, {Topic: "ok-topic", Name: "0"}},
		{{Topic: "ok-topic", Data: make([]byte, outbox.MaxPublishRequestBytes)}}, // the client refuses it
	}
	for i, msgs := range bad {
		c := e.claim(t)
		err := e.cfg.InTx(e.ctx, e.st, func(complete CompleteFunc) error { return complete(c, msgs...) })
		if err == nil {
			t.Errorf("batch %d: CompleteTx must refuse messages Pub/Sub would refuse, or two of one name", i)
		}
		if errors.Is(err, store.ErrFenced) {
			t.Errorf("batch %d: a refused message is not a lost claim: %v", i, err)
		}
		// The claim was not completed: it is still the holder's.
		if ok, err := e.st.Complete(e.ctx, c); err != nil || !ok {
			t.Errorf("batch %d: a refused CompleteTx must leave the claim as it was: Complete = %v, %v", i, ok, err)
		}
	}
	e.backlog(t, 0, "refused messages must enqueue nothing")
}

func takeHoldsUntilSettled(t testing.TB, e *env) {
	e.enqueue(t, outbox.Message{Topic: "t-a", Data: []byte("1")}, outbox.Message{Topic: "t-a", Data: []byte("2")})
	first := e.take(t, 10, time.Minute)
	if len(first) != 2 {
		t.Fatalf("took %d, want 2", len(first))
	}
	if again := e.take(t, 10, time.Minute); len(again) != 0 {
		t.Fatalf("a held message must not be handed to another Take: took %v", childKeys(again))
	}
	e.backlog(t, 2, "held messages are in the backlog")
	e.settle(t, first[:1], first[1:])
	got := e.take(t, 10, time.Minute)
	if len(got) != 1 || got[0].ChildKey != first[1].ChildKey {
		t.Fatalf("Settle must delete the sent one and give back the unsent one at once: took %v, want [%s]", childKeys(got), first[1].ChildKey)
	}
	if got[0].Token == first[1].Token {
		t.Errorf("each Take must have its own token")
	}
	// The first Take's token no longer holds it: giving it back with that
	// token must not free the second Take's hold.
	e.settle(t, nil, first[1:])
	if again := e.take(t, 10, time.Minute); len(again) != 0 {
		t.Fatalf("Settle with a stale token must not give back another Take's message: took %v", childKeys(again))
	}
	e.settle(t, got, nil)
	e.backlog(t, 0, "all sent")
}

func lapsedLeaseHandsOutAgain(t testing.TB, e *env) {
	e.enqueue(t, outbox.Message{Topic: "t-a", Data: []byte("1")})
	first := e.take(t, 10, e.cfg.Lease)
	if len(first) != 1 {
		t.Fatalf("took %d, want 1", len(first))
	}
	var again []outbox.Pending
	if !until(10*time.Second+20*e.cfg.Lease, func() bool {
		again = e.take(t, 10, time.Minute)
		return len(again) > 0
	}) {
		t.Fatalf("a message whose lease lapsed (its relay died) must be handed out again")
	}
	if again[0].ChildKey != first[0].ChildKey || again[0].ID != first[0].ID {
		t.Fatalf("handed out again: %v, want the same message %v", childKeys(again), childKeys(first))
	}
	// The first relay published after all, and marks it sent: it is sent.
	e.settle(t, first, nil)
	e.backlog(t, 0, "a message sent by a relay whose lease lapsed is deleted all the same")
	e.settle(t, again, nil) // the second one's mark finds nothing: no error
}

func orderingKeyWaitsForHeld(t testing.TB, e *env) {
	msg := func(key, data string) outbox.Message {
		return outbox.Message{Topic: "t-o", OrderingKey: key, Data: []byte(data)}
	}
	e.enqueue(t, msg("k", "k1"), msg("k", "k2"))
	e.enqueue(t, msg("k", "k3"), msg("", "u"), msg("j", "j1"))
	first := e.take(t, 1, time.Minute)
	if diff := cmp.Diff([]string{"k1"}, data(first)); diff != "" {
		t.Fatalf("Take(1) (-want +got):\n%s", diff)
	}
	second := e.take(t, 10, time.Minute)
	if diff := cmp.Diff([]string{"u", "j1"}, data(second)); diff != "" {
		t.Fatalf("while k1 is held, k2 and k3 must wait behind it (-want +got):\n%s", diff)
	}
	e.settle(t, nil, first) // k1's publish failed
	third := e.take(t, 10, time.Minute)
	if diff := cmp.Diff([]string{"k1", "k2", "k3"}, data(third)); diff != "" {
		t.Fatalf("a given-back message comes out again first on its key (-want +got):\n%s", diff)
	}
	e.settle(t, third[:1], third[1:]) // k1 sent, k2 failed: k3 given back behind it
	fourth := e.take(t, 10, time.Minute)
	if diff := cmp.Diff([]string{"k2", "k3"}, data(fourth)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// concurrentTakesKeepOrder runs takers at once on messages of a few
// ordering keys and checks that each message is handed out once and the
// messages of a key in their order.
func concurrentTakesKeepOrder(t testing.TB, e *env) {
	const keys, perKey, perTx = 4, 12, 3
	for round := range perKey / perTx {
		var msgs []outbox.Message
		for i := range perTx {
			for k := range keys {
				msgs = append(msgs, outbox.Message{Topic: "t-c", OrderingKey: fmt.Sprint("key", k), Data: []byte(fmt.Sprint(round*perTx + i))})
			}
		}
		e.enqueue(t, msgs...)
	}
	var (
		mu      sync.Mutex              // guards handed
		handed  = map[string][]string{} // ordering key → data in the order taken
		wg      sync.WaitGroup
		errs    = make(chan error, 4)
		total   = keys * perKey
		settled = 0
	)
	for range 4 {
		wg.Go(func() {
			for tries := 0; tries < 500; tries++ {
				mu.Lock()
				done := settled == total
				mu.Unlock()
				if done {
					return
				}
				got, err := e.src.Take(e.ctx, 5, time.Minute)
				if err != nil {
					errs <- fmt.Errorf("a concurrent Take: %w", err)
					return
				}
				mu.Lock()
				for _, p := range got {
					handed[p.OrderingKey] = append(handed[p.OrderingKey], string(p.Data))
				}
				mu.Unlock()
				// Publishing happens here; the next Take of another
				// taker runs meanwhile.
				if err := e.src.Settle(e.ctx, got, nil); err != nil {
					errs <- fmt.Errorf("a concurrent Settle: %w", err)
					return
				}
				mu.Lock()
				settled += len(got)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range keys {
		key := fmt.Sprint("key", k)
		want := make([]string, perKey)
		for i := range want {
			want[i] = fmt.Sprint(i)
		}
		if diff := cmp.Diff(want, handed[key]); diff != "" {
			t.Errorf("ordering key %s: each message must be handed out once, in enqueue order, across concurrent Takes (-want +got):\n%s", key, diff)
		}
	}
	if !slices.Equal([]int{settled}, []int{total}) {
		t.Errorf("settled %d of %d messages", settled, total)
	}
}

// takeFillsPastBlockedKey: rows that wait behind a held message of their
// key never fill a Take's window while a free message waits further on.
func takeFillsPastBlockedKey(t testing.TB, e *env) {
	const window = 4
	var msgs []outbox.Message
	for i := range window + 1 {
		msgs = append(msgs, outbox.Message{Topic: "t-w", OrderingKey: "k", Data: []byte(fmt.Sprint("k", i))})
	}
	e.enqueue(t, msgs...)
	head := e.take(t, 1, time.Minute)
	if len(head) != 1 || string(head[0].Data) != "k0" {
		t.Fatalf("Take(1) = %v, want k0", data(head))
	}
	e.enqueue(t, outbox.Message{Topic: "t-w", Data: []byte("free")})
	got := e.take(t, window, time.Minute)
	if diff := cmp.Diff([]string{"free"}, data(got)); diff != "" {
		t.Fatalf("while k0 is held, the %d later messages of its key wait, and Take(%d) must still hand out the free message behind them (-want +got):\n%s", window, window, diff)
	}
}

// topicSpellingsShareOrder: a topic named by its ID and by its full name
// is one topic, and one ordering key on it is one order.
func topicSpellingsShareOrder(t testing.TB, e *env) {
	e.enqueue(t, outbox.Message{Topic: "t-spell", OrderingKey: "k", Data: []byte("first")})
	e.enqueue(t, outbox.Message{Topic: "projects/p-1/topics/t-spell", OrderingKey: "k", Data: []byte("second")})
	first := e.take(t, 1, time.Minute)
	if diff := cmp.Diff([]string{"first"}, data(first)); diff != "" {
		t.Fatalf("Take(1) (-want +got):\n%s", diff)
	}
	if got := e.take(t, 10, time.Minute); len(got) != 0 {
		t.Fatalf("%q and %q are one topic: its ordering key's second message must wait behind the held first, took %v", "t-spell", "projects/p-1/topics/t-spell", data(got))
	}
	e.settle(t, first, nil)
	if got := e.take(t, 10, time.Minute); len(got) != 1 || string(got[0].Data) != "second" {
		t.Fatalf("after the first is sent, the second comes: took %v", data(got))
	}
}

// failureBacksOff: a failed message waits out its backoff, holding the
// later messages of its key; its failures are counted, untried give-backs
// are not.
func failureBacksOff(t testing.TB, e *env) {
	e.enqueue(t, outbox.Message{Topic: "t-b", OrderingKey: "k", Data: []byte("k0")}, outbox.Message{Topic: "t-b", OrderingKey: "k", Data: []byte("k1")})
	got := e.take(t, 1, time.Minute)
	if len(got) != 1 || got[0].Attempts != 0 {
		t.Fatalf("Take(1) = %v with attempts %v; want k0, never tried", data(got), attempts(got))
	}
	e.fail(t, outbox.Failure{Pending: got[0], Reason: "refused", After: 0})
	got = e.take(t, 1, time.Minute)
	if len(got) != 1 || string(got[0].Data) != "k0" || got[0].Attempts != 1 {
		t.Fatalf("after one failure given back at once, Take(1) = %v with attempts %v; want k0 with 1", data(got), attempts(got))
	}
	e.fail(t, outbox.Failure{Pending: got[0]}) // not tried: not counted
	got = e.take(t, 1, time.Minute)
	if len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("a message given back untried keeps its count: Take(1) = %v with attempts %v; want k0 with 1", data(got), attempts(got))
	}
	e.fail(t, outbox.Failure{Pending: got[0], Reason: "refused again", After: time.Hour})
	if got := e.take(t, 10, time.Minute); len(got) != 0 {
		t.Fatalf("a message backing off for an hour, and the later one of its key behind it, must not be taken: took %v", data(got))
	}
	e.backlog(t, 2, "a message backing off is in the backlog")
	e.enqueue(t, outbox.Message{Topic: "t-b", Data: []byte("other")})
	if got := e.take(t, 10, time.Minute); len(got) != 1 || string(got[0].Data) != "other" {
		t.Fatalf("a backing-off message delays only its own key: took %v, want [other]", data(got))
	}
}

// poisonDoesNotStarveOthers: a window's worth of messages that keep
// failing, given back with a backoff, does not keep later messages from
// being taken.
func poisonDoesNotStarveOthers(t testing.TB, e *env) {
	const window = 3
	var poison []outbox.Message
	for i := range window {
		poison = append(poison, outbox.Message{Topic: "t-p", Data: []byte(fmt.Sprint("poison", i))})
	}
	e.enqueue(t, poison...)
	e.enqueue(t, outbox.Message{Topic: "t-p", Data: []byte("healthy")})
	got := e.take(t, window, time.Minute)
	var failed []outbox.Failure
	for _, p := range got {
		failed = append(failed, outbox.Failure{Pending: p, Reason: "topic not found", After: time.Hour})
	}
	e.fail(t, failed...)
	got = e.take(t, window, time.Minute)
	if len(got) != 1 || string(got[0].Data) != "healthy" {
		t.Fatalf("the poison messages back off: Take(%d) must hand out the healthy one behind them, took %v", window, data(got))
	}
}

// deadKeptListedRevived: a dead message is kept and listed with its
// reason, never taken, holds its key, and comes back with Revive.
func deadKeptListedRevived(t testing.TB, e *env) {
	dl := e.deadLetters(t)
	e.enqueue(t, outbox.Message{Topic: "t-d", OrderingKey: "k", Data: []byte("k0")}, outbox.Message{Topic: "t-d", OrderingKey: "k", Data: []byte("k1")})
	e.enqueue(t, outbox.Message{Topic: "t-d", Data: []byte("free")})
	got := e.take(t, 1, time.Minute)
	if len(got) != 1 || string(got[0].Data) != "k0" {
		t.Fatalf("Take(1) = %v, want k0", data(got))
	}
	e.fail(t, outbox.Failure{Pending: got[0], Reason: "permission denied on topic t-d", Dead: true})
	if got := e.take(t, 10, time.Minute); len(got) != 1 || string(got[0].Data) != "free" {
		t.Fatalf("a dead message is never taken and holds its key: took %v, want [free]", data(got))
	} else {
		e.settle(t, got, nil)
	}
	e.backlog(t, 1, "a dead message is not in the backlog; the live message behind it is")
	dead, err := dl.Dead(e.ctx, 10)
	if err != nil {
		t.Fatalf("Dead: %v", err)
	}
	if len(dead) != 1 || string(dead[0].Data) != "k0" || dead[0].Reason != "permission denied on topic t-d" || dead[0].Attempts != 1 || !dead[0].Holds || dead[0].Died.IsZero() {
		t.Fatalf("Dead = %+v; want k0 with its reason, 1 attempt, a time it died, holding its key", dead)
	}
	if dead[0].ChildKey != got[0].ChildKey || dead[0].Attributes[outbox.ChildKeyAttribute] != got[0].ChildKey {
		t.Errorf("a dead message keeps its child key: %q, want %q", dead[0].ChildKey, got[0].ChildKey)
	}
	if n, err := dl.Revive(e.ctx, dead[0].ID, "no-such-id"); err != nil || n != 1 {
		t.Fatalf("Revive(its ID, an unknown one) = %d, %v; want 1, nil", n, err)
	}
	got = e.take(t, 10, time.Minute)
	if diff := cmp.Diff([]string{"k0", "k1"}, data(got)); diff != "" {
		t.Fatalf("a revived message comes out again first on its key (-want +got):\n%s", diff)
	}
	if got[0].Attempts != 0 {
		t.Errorf("a revived message's attempts count from zero: %d", got[0].Attempts)
	}
	if again, err := dl.Dead(e.ctx, 10); err != nil || len(again) != 0 {
		t.Errorf("after Revive, Dead = %d messages, %v; want none", len(again), err)
	}
}

// deadReleaseLetsKeyPass: a message given up with Release does not hold
// the later messages of its key.
func deadReleaseLetsKeyPass(t testing.TB, e *env) {
	dl := e.deadLetters(t)
	e.enqueue(t, outbox.Message{Topic: "t-r", OrderingKey: "k", Data: []byte("k0")}, outbox.Message{Topic: "t-r", OrderingKey: "k", Data: []byte("k1")})
	got := e.take(t, 1, time.Minute)
	e.fail(t, outbox.Failure{Pending: got[0], Reason: "refused", Dead: true, Release: true})
	if got := e.take(t, 10, time.Minute); len(got) != 1 || string(got[0].Data) != "k1" {
		t.Fatalf("a dead message with Release lets the later ones of its key pass: took %v, want [k1]", data(got))
	}
	dead, err := dl.Dead(e.ctx, 10)
	if err != nil || len(dead) != 1 || dead[0].Holds {
		t.Fatalf("Dead = %+v, %v; want k0, not holding its key", dead, err)
	}
}

// releasedDeadDoNotFillWindow: messages given up with Release, however
// many, never keep a Take from the live messages of their key behind
// them.
func releasedDeadDoNotFillWindow(t testing.TB, e *env) {
	dl := e.deadLetters(t)
	const released = 3
	var msgs []outbox.Message
	for i := range released + 1 {
		msgs = append(msgs, outbox.Message{Topic: "t-rw", OrderingKey: "k", Data: []byte(fmt.Sprint("k", i))})
	}
	e.enqueue(t, msgs...)
	for i := range released {
		got := e.take(t, 1, time.Minute)
		if len(got) != 1 || string(got[0].Data) != fmt.Sprint("k", i) {
			t.Fatalf("Take(1) = %v, want k%d", data(got), i)
		}
		e.fail(t, outbox.Failure{Pending: got[0], Reason: "refused", Dead: true, Release: true})
	}
	got := e.take(t, 1, time.Minute)
	if len(got) != 1 || string(got[0].Data) != fmt.Sprint("k", released) {
		t.Fatalf("after %d messages of a key given up with Release, Take(1) = %v; want the live one behind them", released, data(got))
	}
	dead, err := dl.Dead(e.ctx, 10)
	if err != nil || len(dead) != released {
		t.Fatalf("Dead = %d messages, %v; want %d", len(dead), err, released)
	}
	// Revived, the first comes back first on its key, ahead of the one
	// still held.
	e.settle(t, nil, got)
	if n, err := dl.Revive(e.ctx, dead[0].ID); err != nil || n != 1 {
		t.Fatalf("Revive = %d, %v", n, err)
	}
	if again := e.take(t, 10, time.Minute); len(again) != 2 || string(again[0].Data) != "k0" || string(again[1].Data) != fmt.Sprint("k", released) {
		t.Fatalf("after reviving k0, Take = %v; want k0 then k%d", data(again), released)
	}
}

// settleKeepsRewrittenMessage: a message written anew under the same child
// key after a Take (its parent forgotten by an operator and completed
// again) is not deleted by the first Take's Settle.
func settleKeepsRewrittenMessage(t testing.TB, e *env) {
	op, ok := e.st.(store.Inspector)
	if !ok {
		t.Fatalf("the store (%T) is no store.Inspector: every store in this module must let an operator Forget", e.st)
	}
	c := e.enqueue(t, outbox.Message{Topic: "t-v", Name: "shipment", Data: []byte("v1")})
	v1 := e.take(t, 10, time.Minute)
	if len(v1) != 1 {
		t.Fatalf("took %d, want v1", len(v1))
	}
	if ok, err := op.Forget(e.ctx, c.Key); err != nil || !ok {
		t.Fatalf("Forget(parent) = %v, %v", ok, err)
	}
	next, err := e.st.Claim(e.ctx, c.Key, time.Minute, store.ClaimOptions{})
	if err != nil || next.Status != store.Won {
		t.Fatalf("Claim after Forget = %+v, %v; want Won", next, err)
	}
	e.enqueueWith(t, next, outbox.Message{Topic: "t-v", Name: "shipment", Data: []byte("v2")})
	e.settle(t, v1, nil) // v1 published
	e.backlog(t, 1, "the message written after v1 was taken is unsent")
	var v2 []outbox.Pending
	if !until(10*time.Second, func() bool { v2 = e.take(t, 10, time.Minute); return len(v2) > 0 }) {
		t.Fatal("v2, written under v1's child key after v1 was taken, was deleted by v1's Settle or never handed out")
	}
	if string(v2[0].Data) != "v2" || v2[0].ChildKey != v1[0].ChildKey {
		t.Fatalf("took %q under child key %s; want v2 under v1's child key", v2[0].Data, v2[0].ChildKey)
	}
}

// data lists the data of ps.
func data(ps []outbox.Pending) []string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p.Data))
	}
	return out
}

// attempts lists the attempts of ps.
func attempts(ps []outbox.Pending) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.Attempts)
	}
	return out
}

// fail settles failures.
func (e *env) fail(t testing.TB, fs ...outbox.Failure) {
	t.Helper()
	if err := e.src.Settle(e.ctx, nil, fs); err != nil {
		t.Fatalf("Settle(%d failed): %v", len(fs), err)
	}
}

// statsCountAndAge: Stats counts the live messages (held or not) and the
// dead ones apart, and ages the oldest live one: zero when none is left,
// growing while it waits.
func statsCountAndAge(t testing.TB, e *env) {
	sr, ok := e.src.(relay.Stater)
	if !ok {
		t.Fatalf("the source (%T) is no relay.Stater: a source must tell the age of its oldest unsent message, for on-call's alert", e.src)
	}
	stats := func() outbox.Stats {
		t.Helper()
		st, err := sr.Stats(e.ctx)
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		return st
	}
	if st := stats(); st != (outbox.Stats{}) {
		t.Fatalf("Stats of an empty outbox = %+v, want zero", st)
	}
	e.enqueue(t, outbox.Message{Topic: "t-s", OrderingKey: "k", Data: []byte("k0")}, outbox.Message{Topic: "t-s", OrderingKey: "k", Data: []byte("k1")})
	const wait = 50 * time.Millisecond
	if !until(10*time.Second, func() bool { return stats().Oldest >= wait }) {
		t.Fatalf("the oldest unsent message's age never reached %v: Stats = %+v", wait, stats())
	}
	got := e.take(t, 1, time.Minute)
	if st := stats(); st.Unsent != 2 || st.Dead != 0 {
		t.Errorf("with one of two messages held, Stats = %+v; want 2 unsent, 0 dead", st)
	}
	e.fail(t, outbox.Failure{Pending: got[0], Reason: "permission denied", Dead: true, Release: true})
	if st := stats(); st.Unsent != 1 || st.Dead != 1 || st.Oldest < wait {
		t.Errorf("with one message dead, Stats = %+v; want 1 unsent, 1 dead, the live one at least %v old", st, wait)
	}
	e.settle(t, e.take(t, 10, time.Minute), nil)
	if st := stats(); st.Unsent != 0 || st.Dead != 1 || st.Oldest != 0 {
		t.Errorf("with only a dead message left, Stats = %+v; want 0 unsent, 1 dead, no age", st)
	}
}

// deadLetters returns the source as a relay.DeadLetters.
func (e *env) deadLetters(t testing.TB) relay.DeadLetters {
	t.Helper()
	dl, ok := e.src.(relay.DeadLetters)
	if !ok {
		t.Fatalf("the source (%T) is no relay.DeadLetters: a source must keep the messages a relay gives up on, for an operator", e.src)
	}
	return dl
}
