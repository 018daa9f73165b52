package firestorestore_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
	"github.com/idemgate/idemgate/store/internal/googletest"
)

// TestRPCsPerMessage pins the round trips: a fresh message (Claim then
// Complete) costs four, a duplicate one, and a read-only outcome never
// commits.
func TestRPCsPerMessage(t *testing.T) {
	const get, commit = "BatchGetDocuments", "Commit"
	googletest.RPCsPerMessage(t, wired, googletest.RPCs{
		Fresh:             []string{get, commit, get, commit},
		Duplicate:         []string{get},
		RetriedComplete:   []string{get},
		DuplicateHeld:     []string{get},
		Release:           []string{get, commit},
		ClaimAfterRelease: []string{get, commit},
	})
}

// TestLostCommitReplyReaffirms: a Claim's write lands but its reply is
// lost. The store retries with the same token and must re-affirm the win:
// Won at the fence the first write wrote (the clock in microseconds), not
// HeldByOther, not one more. Both the create of a new record and the
// update of a lapsed one are covered.
func TestLostCommitReplyReaffirms(t *testing.T) {
	w := &googletest.Wire{}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st := newStore(t, wireClient(t, w), firestorestore.Options{Now: func() time.Time { return now }})
	ctx := t.Context()

	w.SetFault(googletest.Once("Commit", googletest.LostReply))
	c, err := st.Claim(ctx, "k", time.Minute)
	if err != nil || c.Status != store.Won || c.Fence != now.UnixMicro() {
		t.Fatalf("Claim after a lost create reply = %v at fence %d, %v; want Won at fence %d (re-affirmed)", c.Status, c.Fence, err, now.UnixMicro())
	}
	if h, err := st.Claim(ctx, "k", time.Minute); err != nil || h.Status != store.HeldByOther {
		t.Fatalf("another Claim = %v, %v; want HeldByOther", h.Status, err)
	}

	now = now.Add(time.Hour) // the lease lapses: the next win updates the record
	w.SetFault(googletest.Once("Commit", googletest.LostReply))
	d, err := st.Claim(ctx, "k", time.Minute)
	if err != nil || d.Status != store.Won || d.Fence != now.UnixMicro() {
		t.Fatalf("reclaim after a lost update reply = %v at fence %d, %v; want Won at fence %d (one raise, to the clock)", d.Status, d.Fence, err, now.UnixMicro())
	}
	if ok, err := st.Complete(ctx, d); !ok || err != nil {
		t.Fatalf("Complete of the re-affirmed claim = %v, %v; want true", ok, err)
	}
}

// TestResentCommitReaffirms: the transport sends a Claim's write twice (as
// gRPC's retry policy may after a connection drops); the second copy fails
// its precondition, and the Claim must still end Won at the fence it wrote.
func TestResentCommitReaffirms(t *testing.T) {
	googletest.ResentCommitReaffirms(t, wired)
}

// TestLostCompleteReply: Complete's write lands, its reply is lost; the
// retry sees DONE with the caller's fence and reports true.
func TestLostCompleteReply(t *testing.T) {
	googletest.LostCompleteReply(t, wired)
}

// TestEndlessConflictGivesUp: a document that changes under every write
// is reported after a bounded number of rounds.
func TestEndlessConflictGivesUp(t *testing.T) {
	googletest.GivesUp(t, wired, status.Error(codes.FailedPrecondition, "injected: the document changed"), "firestorestore: Claim",
		func(err error) bool { return status.Code(err) == codes.FailedPrecondition })
}

// TestCancelledMidCall: a context cancelled while an RPC is in flight
// gives an error that wraps context.Canceled.
func TestCancelledMidCall(t *testing.T) {
	googletest.CancelledMidCall(t, wired)
}
