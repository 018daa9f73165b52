package datastorestore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/relay/relaytest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
)

// TestOutboxSource: the Source contract's cases the store had wrong (issue
// 29): oversized messages, order across skewed clocks, a Settle of a
// message written anew, failures and dead letters.
func TestOutboxSource(t *testing.T) {
	client := newClient(t)
	googletest.OutboxSource(t, func(t *testing.T, skew time.Duration, clocks ...func() time.Time) []googletest.OutboxWorld {
		ns := namespace()
		var ws []googletest.OutboxWorld
		for _, now := range clocks {
			st, err := datastorestore.New(client, &datastorestore.Options{Namespace: ns, SkewMargin: skew, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, googletest.OutboxWorld{Store: st, Source: st.Outbox(), Complete: completeIn(client, st)})
		}
		return ws
	}, googletest.OutboxLimits{Entity: datastorestore.MaxEntityBytes, Commit: datastorestore.MaxCommitBytes})
}

// completeIn is OutboxWorld.Complete for st on client.
func completeIn(client *datastore.Client, st *datastorestore.Store) func(ctx context.Context, c store.Claim, fail error, msgs ...outbox.Message) error {
	return func(ctx context.Context, c store.Claim, fail error, msgs ...outbox.Message) error {
		_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
			if err := st.CompleteTx(tx, c, msgs...); err != nil {
				return err
			}
			return fail
		})
		return err
	}
}

// TestRelaytest runs the outbox conformance suite, its relay cases on the
// Pub/Sub emulator.
func TestRelaytest(t *testing.T) {
	client := newClient(t)
	relaytest.Run(t, relaytest.Config{
		New: func(t testing.TB) (store.Store, relay.Source) {
			st := newStore(t, client, datastorestore.Options{})
			return st, st.Outbox()
		},
		InTx: func(ctx context.Context, st store.Store, fn func(complete relaytest.CompleteFunc) error) error {
			_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
				return fn(func(c store.Claim, msgs ...outbox.Message) error {
					return st.(*datastorestore.Store).CompleteTx(tx, c, msgs...)
				})
			})
			return err
		},
		PubSub: googletest.PubSubClient(t),
	})
}

// ExampleStore_Outbox books an order and enqueues its shipment in one
// transaction; a relay (relay.New(st.Outbox(), pubsubClient, nil).Run)
// then publishes it. Here the outbox is read directly, as a relay does.
func ExampleStore_Outbox() {
	ctx := context.Background()
	client, err := datastore.NewClient(ctx, "my-project")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	st, err := datastorestore.New(client, &datastorestore.Options{Namespace: "shop-" + strings.ToLower(rand.Text()[:8])})
	if err != nil {
		fmt.Println(err)
		return
	}

	c, err := st.Claim(ctx, "order_id:42", time.Minute, store.ClaimOptions{}) // the gateway does this
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		ship := outbox.Message{Topic: "shipments", Data: []byte(`{"order":42}`), Name: "shipment"}
		if err := st.CompleteTx(tx, c, ship); err != nil {
			return err // fenced out: neither the order nor its shipment commits
		}
		_, err := tx.Put(datastore.IncompleteKey("Order", nil), &struct{ ID int }{42})
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	ps, err := st.Outbox().Take(ctx, 10, 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	// A relay publishes them, then st.Outbox().Settle(ctx, ps, nil)
	// deletes them.
	for _, p := range ps {
		fmt.Println(p.Topic, string(p.Data), p.Attributes[outbox.ChildKeyAttribute] == outbox.ChildKey(c.Key, "shipment"))
	}
	// Output:
	// shipments {"order":42} true
}

// TestCompleteTxRefusesMoreMessagesThanACommitHolds: past
// MaxMessagesPerCompleteTx, CompleteTx fails before writing anything, so
// the record stays the claim's and the outbox empty.
func TestCompleteTxRefusesMoreMessagesThanACommitHolds(t *testing.T) {
	ctx := t.Context()
	client := newClient(t)
	st := newStore(t, client, datastorestore.Options{})
	c, err := st.Claim(ctx, "order-1", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]outbox.Message, datastorestore.MaxMessagesPerCompleteTx+1)
	for i := range msgs {
		msgs[i] = outbox.Message{Topic: "shipments", Data: []byte("x")}
	}
	_, err = client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		return st.CompleteTx(tx, c, msgs...)
	})
	if err == nil || !strings.Contains(err.Error(), "more than the 499") {
		t.Fatalf("CompleteTx with %d messages = %v, want the commit limit named", len(msgs), err)
	}
	rec, live, err := st.Inspect(ctx, c.Key)
	if err != nil || !live || rec.State != store.Claimed || rec.Fence != c.Fence {
		t.Errorf("record after the refusal = %+v (live %v, %v), want the claim's, CLAIMED", rec, live, err)
	}
	if n, err := st.Outbox().Backlog(ctx); err != nil || n != 0 {
		t.Errorf("outbox backlog = %d, %v; want 0", n, err)
	}
}

// TestOutboxRPCsPerMessage pins the round trips of an outgoing message:
// an ordered one costs no more than an unordered one (its key's sequence
// is read in the record's lookup and written in the same commit).
func TestOutboxRPCsPerMessage(t *testing.T) {
	w := &googletest.Wire{}
	client := wireClient(t, w)
	st := newStore(t, client, datastorestore.Options{Now: func() time.Time { return googletest.WiredNow }})
	googletest.OutboxRPCsPerMessage(t, googletest.OutboxWorld{Store: st, Source: st.Outbox(), Complete: completeIn(client, st)}, w, googletest.OutboxRPCs{
		Complete:        []string{"BeginTransaction", "Lookup", "Commit"},
		CompleteOrdered: []string{"BeginTransaction", "Lookup", "Commit"},
		Take:            []string{"RunQuery", "RunQuery", "RunQuery", "Lookup", "Commit"},
		SettleFailed:    []string{"Lookup", "Commit"},
		SettleSent:      []string{"Lookup", "Commit"},
	})
}

// The outbox is what a relay publishes from, and keeps what it gives up.
var (
	_ relay.Source      = (*datastorestore.Outbox)(nil)
	_ relay.DeadLetters = (*datastorestore.Outbox)(nil)
)
