package firestorestore_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
	"github.com/idemgate/idemgate/store/internal/googletest"
)

// TestOutbox: messages given to CompleteTx commit with it, and only then;
// the outbox hands each to one Take at a time, in order per ordering key.
func TestOutbox(t *testing.T) {
	client := newClient(t)
	googletest.Outbox(t, func(t *testing.T, now func() time.Time) googletest.OutboxWorld {
		st := newStore(t, client, firestorestore.Options{Now: now})
		return googletest.OutboxWorld{
			Store:  st,
			Source: st.Outbox(),
			Complete: func(ctx context.Context, c store.Claim, fail error, msgs ...outbox.Message) error {
				return client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
					if err := st.CompleteTx(tx, c, msgs...); err != nil {
						return err
					}
					return fail
				})
			},
		}
	})
}
