package datastorestore_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
	"github.com/idemgate/idemgate/store/internal/googletest"
)

// TestOutbox: messages given to CompleteTx commit with it, and only then;
// the outbox hands each to one Take at a time, in order per ordering key.
func TestOutbox(t *testing.T) {
	client := newClient(t)
	googletest.Outbox(t, func(t *testing.T, now func() time.Time) googletest.OutboxWorld {
		st := newStore(t, client, datastorestore.Options{Now: now})
		return googletest.OutboxWorld{
			Store:  st,
			Source: st.Outbox(),
			Complete: func(ctx context.Context, c store.Claim, fail error, msgs ...outbox.Message) error {
				_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
					if err := st.CompleteTx(tx, c, msgs...); err != nil {
						return err
					}
					return fail
				})
				return err
			},
		}
	})
}
