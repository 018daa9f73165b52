package firestorestore_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/relay/relaytest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
)

// TestOutboxSource: the Source contract's cases the store had wrong (issue
// 29): oversized messages, order across skewed clocks, a Settle of a
// message written anew, failures and dead letters.
func TestOutboxSource(t *testing.T) {
	client := newClient(t)
	googletest.OutboxSource(t, func(t *testing.T, skew time.Duration, clocks ...func() time.Time) []googletest.OutboxWorld {
		coll := collection()
		var ws []googletest.OutboxWorld
		for _, now := range clocks {
			st, err := firestorestore.New(client, &firestorestore.Options{Collection: coll, SkewMargin: skew, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, googletest.OutboxWorld{Store: st, Source: st.Outbox(), Complete: completeIn(client, st)})
		}
		return ws
	}, googletest.OutboxLimits{Entity: firestorestore.MaxDocumentBytes, Commit: firestorestore.MaxCommitBytes})
}

// completeIn is OutboxWorld.Complete for st on client.
func completeIn(client *firestore.Client, st *firestorestore.Store) func(ctx context.Context, c store.Claim, fail error, msgs ...outbox.Message) error {
	return func(ctx context.Context, c store.Claim, fail error, msgs ...outbox.Message) error {
		return client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
			if err := st.CompleteTx(tx, c, msgs...); err != nil {
				return err
			}
			return fail
		})
	}
}

// TestRelaytest runs the outbox conformance suite, its relay cases on the
// Pub/Sub emulator.
func TestRelaytest(t *testing.T) {
	client := newClient(t)
	relaytest.Run(t, relaytest.Config{
		New: func(t testing.TB) (store.Store, relay.Source) {
			st := newStore(t, client, firestorestore.Options{})
			return st, st.Outbox()
		},
		InTx: func(ctx context.Context, st store.Store, fn func(complete relaytest.CompleteFunc) error) error {
			return client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
				return fn(func(c store.Claim, msgs ...outbox.Message) error {
					return st.(*firestorestore.Store).CompleteTx(tx, c, msgs...)
				})
			})
		},
		PubSub: googletest.PubSubClient(t),
	})
}

// TestOutboxRPCsPerMessage pins the round trips of an outgoing message:
// an ordered one costs no more than an unordered one (its key's sequence
// is read with the record and written in the same commit).
func TestOutboxRPCsPerMessage(t *testing.T) {
	w := &googletest.Wire{}
	client := wireClient(t, w)
	st := newStore(t, client, firestorestore.Options{Now: func() time.Time { return googletest.WiredNow }})
	googletest.OutboxRPCsPerMessage(t, googletest.OutboxWorld{Store: st, Source: st.Outbox(), Complete: completeIn(client, st)}, w, googletest.OutboxRPCs{
		Complete:        []string{"BeginTransaction", "BatchGetDocuments", "Commit"},
		CompleteOrdered: []string{"BeginTransaction", "BatchGetDocuments", "Commit"},
		Take:            []string{"RunQuery", "RunQuery", "RunQuery", "BeginTransaction", "BatchGetDocuments", "Commit"},
		SettleFailed:    []string{"BeginTransaction", "BatchGetDocuments", "Commit"},
		SettleSent:      []string{"BeginTransaction", "BatchGetDocuments", "Commit"},
	})
}

// The outbox is what a relay publishes from, and keeps what it gives up.
var (
	_ relay.Source      = (*firestorestore.Outbox)(nil)
	_ relay.DeadLetters = (*firestorestore.Outbox)(nil)
)
