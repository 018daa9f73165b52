package relaytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/outbox"
)

// blockedKeyDoesNotStallOthers: however many messages wait behind a key's
// dead head, or behind a head another relay holds, a Take still hands out
// another key's due message: a blocked key delays only itself.
func blockedKeyDoesNotStallOthers(t testing.TB, e *env) {
	const limit = 2
	const behind = 5 * limit // more than a few Take limits' worth
	// block enqueues key's head and behind messages after it, and takes
	// the head.
	block := func(key string) outbox.Pending {
		t.Helper()
		var msgs []outbox.Message
		for i := range behind + 1 {
			msgs = append(msgs, outbox.Message{Topic: "t-st", OrderingKey: key, Data: []byte(fmt.Sprint(key, i))})
		}
		e.enqueue(t, msgs...)
		got := e.take(t, 1, time.Minute)
		if len(got) != 1 || string(got[0].Data) != key+"0" {
			t.Fatalf("Take(1) = %v, want [%s0]", data(got), key)
		}
		return got[0]
	}
	// free enqueues one message of key and checks that a Take hands it out.
	free := func(key, rule string) {
		t.Helper()
		e.enqueue(t, outbox.Message{Topic: "t-st", OrderingKey: key, Data: []byte(key + "0")})
		got := e.take(t, limit, time.Minute)
		if diff := cmp.Diff([]string{key + "0"}, data(got)); diff != "" {
			t.Fatalf("%s, the %d messages behind it wait, and Take(%d) must still hand out %s0 of another key (-want +got):\n%s", rule, behind, limit, key, diff)
		}
		e.settle(t, got, nil)
	}

	c := block("c") // held by a live relay: this Take's lease lasts a minute
	free("d", "with c0 held by another relay")
	e.settle(t, []outbox.Pending{c}, nil)
	if rest := e.take(t, behind, time.Minute); len(rest) != behind {
		t.Fatalf("after c0 is sent, Take(%d) = %v, want the rest of c", behind, data(rest))
	} else {
		e.settle(t, rest, nil)
	}

	a := block("a")
	e.fail(t, outbox.Failure{Pending: a, Reason: "permission denied", Dead: true})
	free("b", "with a0 dead and holding its key")
}
