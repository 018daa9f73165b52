package datastorestore_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
)

// A body that completes inside its transaction must be able to outlive the
// renewed lease: each renewal would write the record the transaction has
// read, and abort it. Once CompleteTx has entered the transaction
// (store.EnterTx) the renewal ends, and a transaction three leases long
// commits, once.
func TestTransactionOutlivesTheRenewedLease(t *testing.T) {
	client := newClient(t)
	st := newStore(t, client, datastorestore.Options{})
	ns := namespace()
	logs := &logtest.Sink{}
	const lease = time.Second // the emulator's commits are slow
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
		_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
			tries++
			if err := st.CompleteTx(tx, c); err != nil {
				return err
			}
			k := datastore.IncompleteKey(ledgerKind, nil)
			k.Namespace = ns
			if _, err := tx.Put(k, &ledgerEntry{Msg: c.Key, Fence: c.Fence}); err != nil {
				return err
			}
			select { // a transaction three leases long
			case <-time.After(3 * lease):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		return err
	})
	if err != nil || tries != 1 {
		t.Fatalf("Lock = %v after %d tries, want nil after one: the transaction outlives the lease", err, tries)
	}
	if n, err := client.Count(t.Context(), datastore.NewQuery(ledgerKind).Namespace(ns)); err != nil || n != 1 {
		t.Fatalf("ledger entities = %d, %v; want 1", n, err)
	}
	if lines := logs.Records().Where(func(r logtest.Record) bool { return r.Level >= slog.LevelWarn }); len(lines) != 0 {
		t.Errorf("WARN and ERROR lines:\n%s", lines)
	}
}
