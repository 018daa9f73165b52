package firestorestore_test

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
)

// TestCompleteTxAfterWrite: a Firestore transaction reads before it
// writes, so CompleteTx after a write fails, and the transaction cannot
// commit even when the caller ignores that error. The claim stays open.
func TestCompleteTxAfterWrite(t *testing.T) {
	client := newClient(t)
	st := newStore(t, client, firestorestore.Options{})
	ctx := t.Context()
	c, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var inner error
	err = client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		if err := tx.Create(client.Collection(collection()).NewDoc(), map[string]any{"n": 1}); err != nil {
			return err
		}
		inner = st.CompleteTx(tx, c)
		return nil // ignore it: the client must still refuse to commit
	})
	const want = "read after write"
	if inner == nil || !strings.Contains(inner.Error(), want) || errors.Is(inner, store.ErrFenced) {
		t.Errorf("CompleteTx after a write = %v, want the client's %q error", inner, want)
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("RunTransaction = %v, want the client's %q error", err, want)
	}
	if h, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || h.Status != store.HeldByOther {
		t.Fatalf("Claim after the refused transaction = %v, %v; want HeldByOther (the record still CLAIMED)", h.Status, err)
	}
}

// TestCompleteTxOtherDatabase: a transaction on another database (here
// another project of the emulator) does not see the store's records, so
// CompleteTx in it is fenced out, and the claim stays open.
func TestCompleteTxOtherDatabase(t *testing.T) {
	st := newStore(t, newClient(t), firestorestore.Options{})
	other, err := firestore.NewClient(t.Context(), project+"-other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	googletest.OtherDatabase(t, st, func(ctx context.Context, c store.Claim) error {
		return other.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error { return st.CompleteTx(tx, c) })
	})
}

// TestCompleteTxRetries: RunTransaction runs the function again after an
// Aborted commit, and CompleteTx then checks the fence afresh. A commit
// that landed and whose reply was lost (Unavailable) is sent again by the
// client's RPC retry, refused as a closed transaction, and not run again.
// The ledger is booked at most once.
func TestCompleteTxRetries(t *testing.T) {
	again := []string{"BeginTransaction", "BatchGetDocuments", "Commit", "Rollback", "BeginTransaction", "BatchGetDocuments"}
	googletest.TxRetries(t, func(t *testing.T) googletest.TxWorld {
		coll := collection()
		// other first: wireClient hides the emulator from newClient.
		other, err := firestorestore.New(newClient(t), &firestorestore.Options{Collection: coll})
		if err != nil {
			t.Fatal(err)
		}
		w := &googletest.Wire{}
		client := wireClient(t, w)
		st, err := firestorestore.New(client, &firestorestore.Options{Collection: coll})
		if err != nil {
			t.Fatal(err)
		}
		ledger := client.Collection(collection())
		return googletest.TxWorld{
			Store: st, Other: other, Wire: w,
			Book: func(ctx context.Context, c store.Claim) error {
				return client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
					if err := st.CompleteTx(tx, c); err != nil {
						return err
					}
					return tx.Create(ledger.NewDoc(), map[string]any{"msg": c.Key, "fence": c.Fence})
				})
			},
			Booked: func(ctx context.Context) (int, error) {
				docs, err := ledger.Documents(ctx).GetAll()
				return len(docs), err
			},
		}
	}, codes.Unavailable, googletest.TxRPCs{
		LostRace:    append(again, "Commit"),
		FencedRetry: append(again, "Rollback"),
		LostReply:   []string{"BeginTransaction", "BatchGetDocuments", "Commit", "Commit", "Rollback"},
	})
}

var (
	zombieSeed     = flag.Uint64("zombie.seed", 0, "seed of TestZombiesCannotRepeatTransactionalWrites (0: from the clock)")
	zombieMessages = flag.Int("zombie.messages", 100, "messages of TestZombiesCannotRepeatTransactionalWrites in each mode")
)

// TestZombiesCannotRepeatTransactionalWrites is datastorestore's zombie
// proof on Firestore: see that package's test for the storm and its
// measurements. Each body books its message as a document with an auto ID
// in a ledger collection; with CompleteTx in the same transaction every
// message is booked once, without it zombies book again.
func TestZombiesCannotRepeatTransactionalWrites(t *testing.T) {
	seed := googletest.Seed(t, *zombieSeed, "zombie.seed")
	client := newClient(t)
	for _, mode := range []struct {
		name          string
		transactional bool
	}{
		{"transactional", true},
		{"plain", false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			st := newStore(t, client, firestorestore.Options{})
			ledger := client.Collection(collection())
			type entry struct {
				Msg   string
				Fence int64
			}
			book := func(ctx context.Context, msg string) error {
				c, ok := gateway.ClaimFromContext(ctx)
				if !ok {
					return errors.New("no claim in the body's context")
				}
				e := entry{Msg: msg, Fence: c.Fence}
				if !mode.transactional {
					_, err := ledger.NewDoc().Create(ctx, e)
					return err
				}
				return client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
					if err := st.CompleteTx(tx, c); err != nil {
						return err
					}
					return tx.Create(ledger.NewDoc(), e)
				})
			}
			msgs := googletest.Messages(*zombieMessages)
			stats := googletest.Storm(t, st, msgs, seed, book)

			docs, err := ledger.Documents(t.Context()).GetAll()
			if err != nil {
				t.Fatal(err)
			}
			count := make(map[string]int, len(msgs))
			for _, d := range docs {
				var e entry
				if err := d.DataTo(&e); err != nil {
					t.Fatal(err)
				}
				count[e.Msg]++
			}
			googletest.CheckLedger(t, msgs, count, stats, mode.transactional)
		})
	}
}

// A body that completes inside its transaction must be able to outlive the
// renewed lease: a renewal writes the record the transaction has read.
// Once CompleteTx has entered the transaction (store.EnterTx) the renewal
// ends, and a transaction three leases long commits, once.
func TestTransactionOutlivesTheRenewedLease(t *testing.T) {
	client := newClient(t)
	st := newStore(t, client, firestorestore.Options{})
	ledger := client.Collection(collection())
	logs := &logtest.Sink{}
	const lease = time.Second
	g, err := gateway.New(st, &gateway.Options{Lease: lease, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	// The emulator's first call can take longer than a lease.
	if _, err := st.Claim(t.Context(), "warm-up", time.Minute, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	tries := 0
	err = g.Lock(t.Context(), "long-tx", func(ctx context.Context) error {
		c, _ := gateway.ClaimFromContext(ctx)
		return client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			tries++
			if err := st.CompleteTx(tx, c); err != nil {
				return err
			}
			if err := tx.Create(ledger.NewDoc(), map[string]any{"msg": c.Key, "fence": c.Fence}); err != nil {
				return err
			}
			select { // a transaction three leases long
			case <-time.After(3 * lease):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	})
	if err != nil || tries != 1 {
		t.Fatalf("Lock = %v after %d tries, want nil after one: the transaction outlives the lease", err, tries)
	}
	if docs, err := ledger.Documents(t.Context()).GetAll(); err != nil || len(docs) != 1 {
		t.Fatalf("ledger documents = %d, %v; want 1", len(docs), err)
	}
	if lines := logs.Records().Where(func(r logtest.Record) bool { return r.Level >= slog.LevelWarn }); len(lines) != 0 {
		t.Errorf("WARN and ERROR lines:\n%s", lines)
	}
}
