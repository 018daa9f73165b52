package firestorestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
)

// TestRPCsPerMessage pins the round trips: a fresh message (Claim then
// Complete) costs four, a duplicate one, and a read-only outcome never
// commits.
func TestRPCsPerMessage(t *testing.T) {
	w := &wire{}
	st := newStore(t, w.client(t), firestorestore.Options{})
	ctx := t.Context()
	step := func(name string, want []string, f func()) {
		t.Helper()
		w.take()
		f()
		got := w.take()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: RPCs (-want +got):\n%s", name, diff)
		}
		t.Logf("%-28s %d RPCs %v", name, len(got), got)
	}
	claim := func(key string, want store.Status) store.Claim {
		t.Helper()
		c, err := st.Claim(ctx, key, time.Minute)
		if err != nil || c.Status != want {
			t.Fatalf("Claim(%q) = %v, %v; want %v", key, c.Status, err, want)
		}
		return c
	}
	const get, commit = "BatchGetDocuments", "Commit"
	var c store.Claim
	step("fresh message", []string{get, commit, get, commit}, func() {
		c = claim("m1", store.Won)
		if ok, err := st.Complete(ctx, c); !ok || err != nil {
			t.Fatalf("Complete = %v, %v", ok, err)
		}
	})
	step("duplicate of a done message", []string{get}, func() { claim("m1", store.AlreadyDone) })
	step("retried Complete", []string{get}, func() { st.Complete(ctx, c) })
	c = claim("m2", store.Won)
	step("duplicate while held", []string{get}, func() { claim("m2", store.HeldByOther) })
	step("Release", []string{get, commit}, func() { st.Release(ctx, c) })
	step("Claim after Release", []string{get, commit}, func() { claim("m2", store.Won) })
}

// lostReply lets a write reach the server and then reports Unavailable,
// as when the connection drops before the reply arrives.
func lostReply(invoke func() error) error {
	if err := invoke(); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "injected: the reply was lost")
}

// TestLostCommitReplyReaffirms: a Claim's write lands but its reply is
// lost. The store retries with the same token and must re-affirm the win:
// Won at fence 1, not HeldByOther, not fence 2. Both the create of a new
// record and the update of a lapsed one are covered.
func TestLostCommitReplyReaffirms(t *testing.T) {
	w := &wire{}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st := newStore(t, w.client(t), firestorestore.Options{Now: func() time.Time { return now }})
	ctx := t.Context()

	w.setFault(once("Commit", lostReply))
	c, err := st.Claim(ctx, "k", time.Minute)
	if err != nil || c.Status != store.Won || c.Fence != 1 {
		t.Fatalf("Claim after a lost create reply = %v at fence %d, %v; want Won at fence 1 (re-affirmed)", c.Status, c.Fence, err)
	}
	if h, err := st.Claim(ctx, "k", time.Minute); err != nil || h.Status != store.HeldByOther {
		t.Fatalf("another Claim = %v, %v; want HeldByOther", h.Status, err)
	}

	now = now.Add(time.Hour) // the lease lapses: the next win updates the record
	w.setFault(once("Commit", lostReply))
	d, err := st.Claim(ctx, "k", time.Minute)
	if err != nil || d.Status != store.Won || d.Fence != 2 {
		t.Fatalf("reclaim after a lost update reply = %v at fence %d, %v; want Won at fence 2 (one bump)", d.Status, d.Fence, err)
	}
	if ok, err := st.Complete(ctx, d); !ok || err != nil {
		t.Fatalf("Complete of the re-affirmed claim = %v, %v; want true", ok, err)
	}
}

// TestResentCommitReaffirms: the transport sends a Claim's write twice (as
// gRPC's retry policy may after a connection drops); the second copy fails
// its precondition, and the Claim must still end Won at fence 1.
func TestResentCommitReaffirms(t *testing.T) {
	w := &wire{}
	st := newStore(t, w.client(t), firestorestore.Options{})
	var second error
	w.setFault(once("Commit", func(invoke func() error) error {
		if err := invoke(); err != nil {
			return err
		}
		second = invoke()
		return second
	}))
	c, err := st.Claim(t.Context(), "k", time.Minute)
	t.Logf("the server answered the resent write with: %v", second)
	if err != nil || c.Status != store.Won || c.Fence != 1 {
		t.Fatalf("Claim with a resent write = %v at fence %d, %v; want Won at fence 1", c.Status, c.Fence, err)
	}
}

// TestLostCompleteReply: Complete's write lands, its reply is lost; the
// retry sees DONE with the caller's fence and reports true.
func TestLostCompleteReply(t *testing.T) {
	w := &wire{}
	st := newStore(t, w.client(t), firestorestore.Options{})
	ctx := t.Context()
	c, err := st.Claim(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w.setFault(once("Commit", lostReply))
	if ok, err := st.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete after a lost reply = %v, %v; want true", ok, err)
	}
	if d, err := st.Claim(ctx, "k", time.Minute); err != nil || d.Status != store.AlreadyDone {
		t.Fatalf("Claim = %v, %v; want AlreadyDone", d.Status, err)
	}
}

// TestEndlessConflictGivesUp: a document that changes under every write
// is reported after a bounded number of rounds.
func TestEndlessConflictGivesUp(t *testing.T) {
	w := &wire{}
	st := newStore(t, w.client(t), firestorestore.Options{})
	w.setFault(func(_ context.Context, method string, invoke func() error) error {
		if method == "Commit" {
			return status.Error(codes.FailedPrecondition, "injected: the document changed")
		}
		return invoke()
	})
	_, err := st.Claim(t.Context(), "k", time.Minute)
	if status.Code(err) != codes.FailedPrecondition || !strings.HasPrefix(err.Error(), "firestorestore: Claim") {
		t.Fatalf("Claim under endless conflict = %v, want a firestorestore error wrapping the last conflict", err)
	}
	commits := 0
	for _, m := range w.take() {
		if m == "Commit" {
			commits++
		}
	}
	if commits != 5 {
		t.Errorf("%d writes attempted, want 5", commits)
	}
	t.Log(err)
}

// TestCancelledMidCall: a context cancelled while an RPC is in flight
// gives an error that wraps context.Canceled (gRPC reports it as a
// status, which does not).
func TestCancelledMidCall(t *testing.T) {
	w := &wire{}
	st := newStore(t, w.client(t), firestorestore.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w.setFault(func(ctx context.Context, method string, invoke func() error) error {
		cancel()
		return invoke()
	})
	_, err := st.Claim(ctx, "k", time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim cancelled mid-call = %v, want an error wrapping context.Canceled", err)
	}
}
