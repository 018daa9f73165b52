package googletest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/store"
)

// TxWorld is what TxRetries works with: a store whose client's RPCs go
// through Wire, another store on the same records beside the wire (another
// instance), and a ledger in the same database.
type TxWorld struct {
	Store Store
	Other Store
	Wire  *Wire
	// Book runs a transaction on the wired client, with the client's own
	// retries, that calls CompleteTx for c and then books one ledger entry.
	Book func(ctx context.Context, c store.Claim) error
	// Booked counts the ledger's entries.
	Booked func(ctx context.Context) (int, error)
}

// TxRPCs are the RPCs of Book in each case of TxRetries.
type TxRPCs struct {
	LostRace    []string // the first commit loses its race; the retry commits
	FencedRetry []string // … and the claim is released before the retry
	LostReply   []string // the first commit lands, its reply is lost
}

// TxRetries checks CompleteTx under the retries of the client's
// transaction runner: a commit that lost its race (Aborted, nothing
// applied) is run again and the retry checks the fence afresh, so a claim
// released in between books nothing; a commit that landed and whose reply
// was lost (lostReply is what the client then sees) is not run again.
// The ledger is booked at most once in every case.
func TxRetries(t *testing.T, newWorld func(t *testing.T) TxWorld, lostReply codes.Code, rpcs TxRPCs) {
	aborted := func(func() error) error { return status.Error(codes.Aborted, "injected: contention") }
	for _, tc := range []struct {
		name    string
		commit  func(invoke func() error) error // the first Commit
		fenced  bool                            // the claim is released after the first attempt
		wantErr func(error) bool
		rpcs    []string
		booked  int
	}{
		{"lost race", aborted, false, func(err error) bool { return err == nil }, rpcs.LostRace, 1},
		{"lost race, fenced out before the retry", aborted, true, func(err error) bool { return errors.Is(err, store.ErrFenced) }, rpcs.FencedRetry, 0},
		{"commit landed, reply lost", LostReplyAs(lostReply), false, func(err error) bool { return err != nil && !errors.Is(err, store.ErrFenced) }, rpcs.LostReply, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			w := newWorld(t)
			c, err := w.Store.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			first := true // the calls run one at a time, on this goroutine
			w.Wire.SetFault(func(ctx context.Context, method string, invoke func() error) error {
				switch {
				case method == "Commit" && first:
					return tc.commit(invoke)
				case method == "Rollback" && first:
					first = false
					err := invoke()
					if tc.fenced {
						if err := w.Other.Release(ctx, c); err != nil {
							t.Error(err)
						}
					}
					return err
				}
				return invoke()
			})
			w.Wire.Take()
			err = w.Book(ctx, c)
			w.Wire.SetFault(nil)
			if !tc.wantErr(err) {
				t.Errorf("the booking transaction returned %v", err)
			}
			if got := w.Wire.Take(); !cmp.Equal(got, tc.rpcs) {
				t.Errorf("RPCs = %v, want %v", got, tc.rpcs)
			}
			n, err := w.Booked(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.booked {
				t.Errorf("%d ledger entries, want %d", n, tc.booked)
			}
		})
	}
}

// OtherDatabase checks that CompleteTx in a transaction of another
// database, which cannot see st's records, is fenced out and leaves the
// claim alone. inOther runs CompleteTx(tx, c) of st in such a transaction
// and returns what the transaction returned. st must be fresh.
func OtherDatabase(t *testing.T, st Store, inOther func(ctx context.Context, c store.Claim) error) {
	ctx := t.Context()
	c, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inOther(ctx, c); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("CompleteTx in another database's transaction = %v, want ErrFenced", err)
	}
	if ok, err := st.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete after = %v, %v; want true (the claim untouched)", ok, err)
	}
}
