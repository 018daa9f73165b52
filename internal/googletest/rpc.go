package googletest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
)

// Wired returns a fresh store, set to its defaults, whose client's RPCs
// go through the Wire it returns.
type Wired func(t testing.TB) (Store, *Wire)

// RPCs are the calls, in order, each step of RPCsPerMessage must make.
type RPCs struct {
	Fresh             []string // Claim then Complete of a new key
	Duplicate         []string // Claim of a done key
	RetriedComplete   []string // Complete of a done claim
	DuplicateHeld     []string // Claim of a held key
	Release           []string
	ClaimAfterRelease []string
	Fail              []string // a final Fail of the claim won after Release
	DuplicateFailed   []string // Claim of a failed key
	Retry             []string
}

// RPCsPerMessage pins the round trips of each step of a message's life
// of a store from wired. Every Claim carries a full-size fingerprint, as
// the gateway's do: keeping it must cost no round trip.
func RPCsPerMessage(t *testing.T, wired Wired, want RPCs) {
	st, w := wired(t)
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: Fingerprint}
	step := func(name string, want []string, f func()) []string {
		t.Helper()
		return pinRPCs(t, w, name, want, f)
	}
	// readOnly fails the test when a step that must write nothing
	// committed, whatever the store's want says.
	readOnly := func(name string, got []string) {
		t.Helper()
		if slices.Contains(got, "Commit") {
			t.Errorf("%s: RPCs %v include a Commit; a Claim or Complete that finds the work done must write nothing", name, got)
		}
	}
	claim := func(key string, want store.Status) store.Claim {
		t.Helper()
		c, err := st.Claim(ctx, key, time.Minute, opts)
		if err != nil || c.Status != want {
			t.Fatalf("Claim(%q) = %v, %v; want %v", key, c.Status, err, want)
		}
		return c
	}
	var c store.Claim
	step("fresh message", want.Fresh, func() {
		c = claim("m1", store.Won)
		if ok, err := st.Complete(ctx, c); !ok || err != nil {
			t.Fatalf("Complete = %v, %v", ok, err)
		}
	})
	readOnly("duplicate of a done message", step("duplicate of a done message", want.Duplicate, func() { claim("m1", store.AlreadyDone) }))
	readOnly("retried Complete", step("retried Complete", want.RetriedComplete, func() {
		if ok, err := st.Complete(ctx, c); !ok || err != nil {
			t.Fatalf("retried Complete = %v, %v; want true", ok, err)
		}
	}))
	c = claim("m2", store.Won)
	readOnly("duplicate while held", step("duplicate while held", want.DuplicateHeld, func() { claim("m2", store.HeldByOther) }))
	step("Release", want.Release, func() { st.Release(ctx, c) })
	step("Claim after Release", want.ClaimAfterRelease, func() { c = claim("m2", store.Won) })
	step("Fail", want.Fail, func() {
		if n, failed, err := st.Fail(ctx, c, store.Failure{Reason: "refused", Final: true}); n != 1 || !failed || err != nil {
			t.Fatalf("Fail = %d, %v, %v; want 1, true", n, failed, err)
		}
	})
	readOnly("duplicate of a failed message", step("duplicate of a failed message", want.DuplicateFailed, func() { claim("m2", store.AlreadyFailed) }))
	step("Retry", want.Retry, func() {
		if ok, err := st.Retry(ctx, "m2"); !ok || err != nil {
			t.Fatalf("Retry = %v, %v; want true", ok, err)
		}
	})
}

// WiredNow is the fixed clock of the stores a Wired returns: a Claim of a
// key without a record wins at fence WiredNow.UnixMicro(), and a second
// raise of the fence shows as one more.
var WiredNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// ResentCommitReaffirms: the transport sends a Claim's first commit twice
// (as gRPC's retry policy may after a connection drops). Whatever the
// server answers the second copy, the Claim must end Won at the fence the
// first wrote (WiredNow in microseconds), with the fingerprint it kept.
func ResentCommitReaffirms(t *testing.T, wired Wired) {
	st, w := wired(t)
	var second error
	w.SetFault(Once("Commit", func(invoke func() error) error {
		if err := invoke(); err != nil {
			return err
		}
		second = invoke()
		return second
	}))
	c, err := st.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{Fingerprint: Fingerprint})
	t.Logf("the server answered the resent commit with: %v", second)
	if want := WiredNow.UnixMicro(); err != nil || c.Status != store.Won || c.Fence != want || !bytes.Equal(c.Fingerprint, Fingerprint) {
		t.Fatalf("Claim with a resent commit = %v at fence %d with fingerprint %x, %v; want Won at fence %d with the Claim's fingerprint", c.Status, c.Fence, c.Fingerprint, err, want)
	}
}

// LostCompleteReply: Complete's commit lands, its reply is lost; the
// retry sees DONE with the caller's fence and reports true.
func LostCompleteReply(t *testing.T, wired Wired) {
	st, c := loseNextReply(t, wired)
	ctx := t.Context()
	if ok, err := st.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete after a lost reply = %v, %v; want true", ok, err)
	}
	if d, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || d.Status != store.AlreadyDone {
		t.Fatalf("Claim = %v, %v; want AlreadyDone", d.Status, err)
	}
}

// LostFailReply: Fail's commit lands, its reply is lost; the retry finds
// the record FAILED under the caller's fence and answers as the commit
// would have, without counting the failure twice.
func LostFailReply(t *testing.T, wired Wired) {
	st, c := loseNextReply(t, wired)
	ctx := t.Context()
	if n, failed, err := st.Fail(ctx, c, store.Failure{Reason: "refused", MaxAttempts: 1}); n != 1 || !failed || err != nil {
		t.Fatalf("Fail after a lost reply = %d, %v, %v; want 1, true", n, failed, err)
	}
	if d, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || d.Status != store.AlreadyFailed || d.Attempts != 1 || d.Reason != "refused" {
		t.Fatalf("Claim = %v with %d attempts (%q), %v; want AlreadyFailed with 1 (\"refused\")", d.Status, d.Attempts, d.Reason, err)
	}
}

// loseNextReply returns a store from wired with a won claim of "k", and
// the reply to the store's next commit set to be lost.
func loseNextReply(t *testing.T, wired Wired) (Store, store.Claim) {
	t.Helper()
	st, w := wired(t)
	c, err := st.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.SetFault(Once("Commit", LostReply))
	return st, c
}

// GivesUp: a key whose every commit fails with injected, an error the
// store retries, is reported after five commits, as an error that starts
// with prefix (e.g. "datastorestore: Claim") and satisfies is.
func GivesUp(t *testing.T, wired Wired, injected error, prefix string, is func(error) bool) {
	st, w := wired(t)
	w.SetFault(Always("Commit", injected))
	_, err := st.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
	if !is(err) || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("Claim whose every commit fails = %v, want a %q error wrapping the last failure", err, prefix)
	}
	if n := w.Count("Commit"); n != 5 {
		t.Errorf("%d commits attempted, want 5", n)
	}
	t.Log(err)
}

// CancelledMidCall: a context cancelled while an RPC is in flight gives
// an error that wraps context.Canceled (gRPC reports it as a status,
// which does not).
func CancelledMidCall(t *testing.T, wired Wired) {
	st, w := wired(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w.SetFault(func(ctx context.Context, method string, invoke func() error) error {
		cancel()
		return invoke()
	})
	_, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim cancelled mid-call = %v, want an error wrapping context.Canceled", err)
	}
}

// OutboxRPCs are the calls, in order, each step of OutboxRPCsPerMessage
// must make.
type OutboxRPCs struct {
	Complete        []string // a CompleteTx transaction with one unordered message
	CompleteOrdered []string // the same with one ordered message: the same calls
	Take            []string // a Take of both messages, its queries included
	SettleSent      []string
	SettleFailed    []string
}

// OutboxRPCsPerMessage pins the round trips of an outgoing message's life
// in w, whose client's RPCs go through wire: two messages, one without
// an ordering key and one with, each enqueued by a CompleteTx, both
// taken, given back once, taken again and settled as sent.
func OutboxRPCsPerMessage(t *testing.T, w OutboxWorld, wire *Wire, want OutboxRPCs) {
	ctx := t.Context()
	step := func(name string, want []string, f func()) {
		t.Helper()
		pinRPCs(t, wire, name, want, f)
	}
	complete := func(key string, m outbox.Message) {
		t.Helper()
		c := claimWon(t, w, key, time.Minute)
		step("CompleteTx, "+key, want.Complete, func() {
			if err := w.Complete(ctx, c, nil, m); err != nil {
				t.Fatal(err)
			}
		})
	}
	complete("unordered", outbox.Message{Topic: "shipments"})
	want.Complete = want.CompleteOrdered
	complete("ordered", outbox.Message{Topic: "invoices", OrderingKey: "k"})
	var ps []outbox.Pending
	step("Take", want.Take, func() {
		if ps = takeN(t, w, 2, time.Minute); len(ps) != 2 {
			t.Fatalf("Take = %d messages, want both", len(ps))
		}
	})
	step("Settle failed", want.SettleFailed, func() {
		f := []outbox.Failure{{Pending: ps[0], Reason: "refused"}, {Pending: ps[1], Reason: "refused"}}
		if err := w.Source.Settle(ctx, nil, f); err != nil {
			t.Fatal(err)
		}
	})
	ps = takeN(t, w, 2, time.Minute)
	step("Settle sent", want.SettleSent, func() {
		if err := w.Source.Settle(ctx, ps, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// pinRPCs runs f, the step name, and fails t unless the RPCs it made
// through w are want. It returns them.
func pinRPCs(t *testing.T, w *Wire, name string, want []string, f func()) []string {
	t.Helper()
	w.Take()
	f()
	got := w.Take()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: RPCs (-want +got):\n%s", name, diff)
	}
	t.Logf("%-32s %d RPCs %v", name, len(got), got)
	return got
}
