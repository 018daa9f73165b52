package datastorestore_test

import (
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
)

// wired returns a fresh store whose client's RPCs go through a new Wire.
func wired(t testing.TB) (googletest.Store, *googletest.Wire) {
	w := &googletest.Wire{}
	return newStore(t, wireClient(t, w), datastorestore.Options{Now: func() time.Time { return googletest.WiredNow }}), w
}

// wireClient returns a client of the test emulator whose unary RPCs go
// through w.
func wireClient(t testing.TB, w *googletest.Wire) *datastore.Client {
	t.Helper()
	return newClient(t, option.WithGRPCDialOption(grpc.WithUnaryInterceptor(w.Unary)))
}

// TestRPCsPerMessage pins the round trips: a fresh message (Claim then
// Complete) costs four, a duplicate one lookup, and an outcome that writes
// nothing never commits. A Claim looks the entity up outside a transaction
// first (strongly consistent): a duplicate ends there; a new key is
// inserted by one non-transactional commit that fails if the entity exists;
// only the takeover of an existing record runs a transaction.
func TestRPCsPerMessage(t *testing.T) {
	const lookup, commit, rollback = "Lookup", "Commit", "Rollback"
	googletest.RPCsPerMessage(t, wired, googletest.RPCs{
		Fresh:             []string{lookup, commit, lookup, commit},
		Duplicate:         []string{lookup},
		RetriedComplete:   []string{lookup, rollback},
		DuplicateHeld:     []string{lookup},
		Release:           []string{lookup, commit},
		ClaimAfterRelease: []string{lookup, lookup, commit},
		Fail:              []string{lookup, commit},
		DuplicateFailed:   []string{lookup},
		Retry:             []string{lookup, commit},
	})
}

// TestLostCommitReplyReaffirms: the first commit of a Claim lands, but
// its reply is lost (the client sees Unavailable). The store retries with
// the same token and must re-affirm the win: Won at the fence the first
// commit wrote, not HeldByOther, not one more.
func TestLostCommitReplyReaffirms(t *testing.T) {
	st, w := wired(t)
	ctx := t.Context()
	w.SetFault(googletest.Once("Commit", googletest.LostReply))
	c, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatalf("Claim after a lost commit reply: %v", err)
	}
	if want := googletest.WiredNow.UnixMicro(); c.Status != store.Won || c.Fence != want {
		t.Fatalf("Claim after a lost commit reply = %v at fence %d, want Won at fence %d (re-affirmed)", c.Status, c.Fence, want)
	}
	// The insert of the new record fails as far as the client knows; the
	// retry looks the entity up, finds its own token and writes nothing.
	if got, want := w.Take(), []string{"Lookup", "Commit", "Lookup"}; !cmp.Equal(got, want) {
		t.Errorf("RPCs = %v, want %v (the retry must find its own token and write nothing)", got, want)
	}
	if h, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || h.Status != store.HeldByOther {
		t.Fatalf("another Claim = %v, %v; want HeldByOther", h.Status, err)
	}
	if ok, err := st.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete of the re-affirmed claim = %v, %v; want true", ok, err)
	}
}

// TestResentCommitReaffirms: the transport sends the first commit twice
// (as gRPC's retry policy does after a connection drops): the second copy
// meets a transaction that is already over, whatever the server then
// answers, the Claim must end Won at the fence the first commit wrote.
func TestResentCommitReaffirms(t *testing.T) {
	googletest.ResentCommitReaffirms(t, wired)
}

// TestLostCompleteReply: Complete's commit lands, its reply is lost; the
// retry sees DONE with the caller's fence and reports true.
func TestLostCompleteReply(t *testing.T) {
	googletest.LostCompleteReply(t, wired)
}

// TestLostFailReply: a Fail whose commit landed unseen is retried; the
// retry finds the record FAILED under the claim's fence.
func TestLostFailReply(t *testing.T) {
	googletest.LostFailReply(t, wired)
}

// TestContentionGivesUp: a key whose every commit loses its race is
// reported after a bounded number of attempts, as an error that wraps
// datastore.ErrConcurrentTransaction.
func TestContentionGivesUp(t *testing.T) {
	googletest.GivesUp(t, wired, status.Error(codes.Aborted, "injected: too much contention"), "datastorestore: Claim",
		func(err error) bool { return errors.Is(err, datastore.ErrConcurrentTransaction) })
}

// TestCancelledMidCall: a context cancelled while an RPC is in flight
// gives an error that wraps context.Canceled.
func TestCancelledMidCall(t *testing.T) {
	googletest.CancelledMidCall(t, wired)
}

// TestInsertLosesToConcurrentClaim: a Claim of a new key looks it up,
// finds nothing and inserts it; another process claims the key between the
// lookup and the insert. The insert must fail rather than overwrite that
// claim, and the Claim, looking again, must report HeldByOther: one winner.
func TestInsertLosesToConcurrentClaim(t *testing.T) {
	w := &googletest.Wire{}
	o := datastorestore.Options{Namespace: namespace()}
	st, err := datastorestore.New(wireClient(t, w), &o)
	if err != nil {
		t.Fatal(err)
	}
	other, err := datastorestore.New(newClient(t), &o) // another process, on its own client
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var won store.Claim
	w.SetFault(googletest.Once("Commit", func(invoke func() error) error {
		var err error
		if won, err = other.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || won.Status != store.Won {
			t.Errorf("the other Claim = %v, %v; want Won", won.Status, err)
		}
		return invoke()
	}))
	c, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.HeldByOther {
		t.Fatalf("Claim that lost the insert = %v, %v; want HeldByOther", c.Status, err)
	}
	if got, want := w.Take(), []string{"Lookup", "Commit", "Lookup"}; !cmp.Equal(got, want) {
		t.Errorf("RPCs = %v, want %v (the failed insert, then a lookup that finds the other claim)", got, want)
	}
	if ok, err := other.Complete(ctx, won); !ok || err != nil {
		t.Fatalf("the winner's Complete = %v, %v; want true (its claim was not overwritten)", ok, err)
	}
}
