package sqlstore_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// A body that completes inside its transaction, CompleteTx first as
// documented, holds the record's row lock until it commits. The gateway's
// renewal must not queue behind that lock and cancel the body for a lease
// nobody can take over while the lock is held (issue 21, item 17): once
// CompleteTx has entered the transaction (store.EnterTx) the renewal ends,
// and a transaction three leases long still commits, once; a redelivery
// meanwhile is no second run.
func TestTransactionOutlivesTheRenewedLease(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t, 4)
			if b.dialect == sqliteBackend.dialect {
				db.SetMaxOpenConns(1) // as the package documents; the redelivery then waits for the commit
			}
			s := b.store(t, db, nil)
			ledger := uniqueTable()
			if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+ledger+" (msg VARCHAR(64))"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE "+ledger) })
			logs := &logtest.Sink{}
			const lease = 300 * time.Millisecond
			g, err := gateway.New(s, &gateway.Options{Lease: lease, Logger: logs.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			insert := "INSERT INTO " + ledger + " (msg) VALUES (?)"
			if b.dialect == sqlstore.PostgreSQL {
				insert = "INSERT INTO " + ledger + " (msg) VALUES ($1)"
			}
			runs := 0
			err = g.Lock(t.Context(), "long-tx", func(ctx context.Context) error {
				runs++
				c, _ := gateway.ClaimFromContext(ctx)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if err := s.CompleteTx(ctx, tx, c); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, insert, "long-tx"); err != nil {
					return err
				}
				select { // a transaction three leases long
				case <-time.After(3 * lease):
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				return tx.Commit()
			})
			if err != nil || runs != 1 {
				t.Fatalf("Lock = %v (ran %d), want nil and one run: the transaction outlives the lease", err, runs)
			}
			if err := g.Lock(t.Context(), "long-tx", func(context.Context) error { runs++; return nil }); !errors.Is(err, gateway.ErrDuplicate) {
				t.Fatalf("a redelivery after the commit = %v, want ErrDuplicate", err)
			}
			var n int
			if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+ledger).Scan(&n); err != nil || n != 1 {
				t.Fatalf("ledger rows = %d, %v; want 1", n, err)
			}
			if lines := logs.Records().Where(func(r logtest.Record) bool { return r.Level >= slog.LevelWarn }); len(lines) != 0 {
				t.Errorf("WARN and ERROR lines:\n%s", lines)
			}
		})
	}
}
