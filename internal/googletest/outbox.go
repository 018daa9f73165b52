package googletest

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
)

// OutboxWorld is a store and its outbox for the outbox cases.
type OutboxWorld struct {
	Store  Store
	Source relay.Source
	// Complete runs a transaction that calls the store's CompleteTx with c
	// and msgs and then returns fail: nil commits, anything else rolls
	// back. It returns the transaction's error.
	Complete func(ctx context.Context, c store.Claim, fail error, msgs ...outbox.Message) error
}

// PubSubClient returns a client on the Pub/Sub emulator, in a project of
// t's own, closed when t ends: relaytest.Config.PubSub.
func PubSubClient(t *testing.T) *pubsub.Client {
	t.Helper()
	host := testenv.PubSubEmulatorHost(t)
	c, err := pubsub.NewClient(t.Context(), testenv.PubSubProject(t), testenv.PubSubClientOptions(host)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// claimWon claims key in w's store for lease, failing t unless it wins.
func claimWon(t *testing.T, w OutboxWorld, key string, lease time.Duration) store.Claim {
	t.Helper()
	c, err := w.Store.Claim(t.Context(), key, lease, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim(%q) = %v, %v; want Won", key, c.Status, err)
	}
	return c
}

// takeN takes up to n messages from w's outbox for lease, failing t on an
// error.
func takeN(t *testing.T, w OutboxWorld, n int, lease time.Duration) []outbox.Pending {
	t.Helper()
	ps, err := w.Source.Take(t.Context(), n, lease)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return ps
}
