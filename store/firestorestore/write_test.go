package firestorestore_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
)

// TestRPCsPerMessage pins the round trips: a fresh message (Claim then
// Complete) costs three, a duplicate one read, and an outcome that writes
// nothing never commits. The store remembers the live claim it last wrote
// of each key, so its holder's next write (Complete, Release, Extend,
// Fail) is a single commit conditioned on that version's update time,
// with no read; a duplicate answered HeldByOther meanwhile keeps it. A Claim always
// reads first, a Claim after this store's own Release included: it may be
// a duplicate of a message another process completed since.
func TestRPCsPerMessage(t *testing.T) {
	const get, commit = "BatchGetDocuments", "Commit"
	googletest.RPCsPerMessage(t, wired, googletest.RPCs{
		Fresh:             []string{get, commit, commit},
		Duplicate:         []string{get},
		RetriedComplete:   []string{get},
		DuplicateHeld:     []string{get},
		Release:           []string{commit},
		ClaimAfterRelease: []string{get, commit},
		Fail:              []string{commit},
		DuplicateFailed:   []string{get},
		Retry:             []string{get, commit},
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
	c, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won || c.Fence != now.UnixMicro() {
		t.Fatalf("Claim after a lost create reply = %v at fence %d, %v; want Won at fence %d (re-affirmed)", c.Status, c.Fence, err, now.UnixMicro())
	}
	if h, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || h.Status != store.HeldByOther {
		t.Fatalf("another Claim = %v, %v; want HeldByOther", h.Status, err)
	}

	now = now.Add(time.Hour) // the lease lapses: the next win updates the record
	w.SetFault(googletest.Once("Commit", googletest.LostReply))
	d, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
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

// TestLostFailReply: a Fail whose commit landed unseen is retried on a
// fresh read (the remembered version is dropped); the retry finds the
// record FAILED under the claim's fence.
func TestLostFailReply(t *testing.T) {
	googletest.LostFailReply(t, wired)
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

// TestRememberedVersionStale: a store writes a key it claimed on the
// condition that the document is still the version it wrote, without
// reading it. When the document changed in between — an operator's Forget
// through another store on the same collection, or the TTL policy's
// delete — the condition fails, and the store reads and decides on what is
// there: the Complete of the claim reports false and writes nothing, so
// the record is not made DONE behind the change.
func TestRememberedVersionStale(t *testing.T) {
	w := &googletest.Wire{}
	client := wireClient(t, w)
	o := firestorestore.Options{Collection: collection(), Now: func() time.Time { return googletest.WiredNow }}
	st, err := firestorestore.New(client, &o)
	if err != nil {
		t.Fatal(err)
	}
	other, err := firestorestore.New(client, &o) // another process's store
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		change func(key string)
		after  func(t *testing.T, key string) // what the record must be after the Complete
	}{
		{"forgotten", func(key string) {
			if ok, err := other.Forget(ctx, key); !ok || err != nil {
				t.Fatalf("Forget = %v, %v", ok, err)
			}
		}, func(t *testing.T, key string) {
			r, ok, err := other.Inspect(ctx, key)
			if err != nil || !ok || r.State != store.Claimed || r.Token != "" {
				t.Fatalf("record after the Complete = %+v, %v, %v; want the released claim Forget left", r, ok, err)
			}
		}},
		{"deleted", func(key string) { deleteRecord(t, other, key) }, func(t *testing.T, key string) {
			if r, ok, err := other.Inspect(ctx, key); err != nil || ok {
				t.Fatalf("record after the Complete = %+v, %v, %v; want none", r, ok, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-" + tc.name
			c, err := st.Claim(ctx, key, time.Minute, store.ClaimOptions{})
			if err != nil || c.Status != store.Won {
				t.Fatalf("Claim = %v, %v", c.Status, err)
			}
			tc.change(key)
			w.Take()
			if ok, err := st.Complete(ctx, c); ok || err != nil {
				t.Fatalf("Complete after the record changed = %v, %v; want false", ok, err)
			}
			if got, want := w.Take(), []string{"Commit", "BatchGetDocuments"}; !slices.Equal(got, want) {
				t.Errorf("RPCs = %v, want %v (a conditional write that fails, then a read)", got, want)
			}
			tc.after(t, key)
		})
	}
}

// TestDuplicateAfterCompletionElsewhere: a duplicate is one read that
// writes nothing, whatever this store saw of the key before. Another store
// on the same collection (another instance) completes a key that this
// store had claimed and released, had answered HeldByOther for, or had
// claimed and let lapse; the copy this store then gets must be answered
// AlreadyDone from a single read, without first trying a write on what it
// saw. The clock of this store runs past every lease before that copy
// comes, as when the other instance finishes late.
func TestDuplicateAfterCompletionElsewhere(t *testing.T) {
	w := &googletest.Wire{}
	client := wireClient(t, w)
	coll := collection()
	now := googletest.WiredNow
	st, err := firestorestore.New(client, &firestorestore.Options{Collection: coll, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	other, err := firestorestore.New(client, &firestorestore.Options{Collection: coll, Now: func() time.Time { return googletest.WiredNow }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	claim := func(t *testing.T, st *firestorestore.Store, key string, want store.Status) store.Claim {
		t.Helper()
		c, err := st.Claim(ctx, key, time.Minute, store.ClaimOptions{})
		if err != nil || c.Status != want {
			t.Fatalf("Claim(%q) = %v, %v; want %v", key, c.Status, err, want)
		}
		return c
	}
	complete := func(t *testing.T, st *firestorestore.Store, c store.Claim) {
		t.Helper()
		if ok, err := st.Complete(ctx, c); !ok || err != nil {
			t.Fatalf("Complete(%q) = %v, %v; want true", c.Key, ok, err)
		}
	}
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, key string) // this store's history, and the other's completion
	}{
		{"released here", func(t *testing.T, key string) {
			if err := st.Release(ctx, claim(t, st, key, store.Won)); err != nil {
				t.Fatalf("Release: %v", err)
			}
			complete(t, other, claim(t, other, key, store.Won))
		}},
		{"held by the other", func(t *testing.T, key string) {
			c := claim(t, other, key, store.Won)
			claim(t, st, key, store.HeldByOther)
			complete(t, other, c)
		}},
		{"lapsed here", func(t *testing.T, key string) {
			claim(t, st, key, store.Won)
			lapsed := now.Add(2 * time.Minute)
			o := firestorestore.Options{Collection: coll, Now: func() time.Time { return lapsed }}
			late, err := firestorestore.New(client, &o) // the other instance, once the lease lapsed
			if err != nil {
				t.Fatal(err)
			}
			complete(t, late, claim(t, late, key, store.Won))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now = googletest.WiredNow
			key := "k-" + tc.name
			tc.before(t, key)
			now = googletest.WiredNow.Add(2 * time.Minute) // every lease lapsed, the record not expired
			w.Take()
			claim(t, st, key, store.AlreadyDone)
			if got, want := w.Take(), []string{"BatchGetDocuments"}; !slices.Equal(got, want) {
				t.Errorf("RPCs of the duplicate = %v, want %v (a duplicate is one read that writes nothing)", got, want)
			}
		})
	}
}
