package sqlstore_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/store"
)

// On SQLite an Extend needs a connection and the write lock. A transaction
// that holds the only connection, or has written on another one, makes it
// wait; when it runs out of time there, the error names that cause and the
// ways out, rather than a bare "context deadline exceeded". The claim itself is intact: once the transaction ends, Extend works.
func TestSQLiteExtendBehindAnOpenTransaction(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conns int
		cause string
	}{
		{"one connection", 1, "SQLite is served here on 1 connection(s) (SetMaxOpenConns), all held until the deadline"},
		{"write lock", 2, "a transaction on another connection held the write lock until the deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := sqliteBackend.open(t, tc.conns)
			s := sqliteBackend.store(t, db, nil)
			ledger := uniqueTable()
			if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+ledger+" (msg TEXT)"); err != nil {
				t.Fatal(err)
			}
			c, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
			if err != nil || c.Status != store.Won {
				t.Fatalf("Claim = %+v, %v; want Won", c, err)
			}
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(t.Context(), "INSERT INTO "+ledger+" (msg) VALUES ('k')"); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			_, err = s.Extend(ctx, c, time.Minute)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Extend behind the transaction = %v, want context.DeadlineExceeded", err)
			}
			for _, part := range []string{"sqlstore: extend: ", tc.cause, "call CompleteTx first", "or raise Lease"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("Extend's error %q does not say %q", err, part)
				}
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Extend(t.Context(), c, time.Minute); err != nil {
				t.Errorf("Extend after the transaction ended = %v, want nil: the claim was never lost", err)
			}
		})
	}
}

// The same case through the gateway: on SQLite's one
// connection, a body whose transaction does not begin with CompleteTx and
// outlives the renewal's deadline loses its claim; the body is cancelled,
// its transaction rolls back, and the ERROR line says why and what to do.
// (A transaction that calls CompleteTx first is not concerned: see
// TestTransactionOutlivesTheRenewedLease.)
func TestSQLiteRenewalBehindTheBodysTransaction(t *testing.T) {
	db := sqliteBackend.open(t, 1)
	s := sqliteBackend.store(t, db, nil)
	ledger := uniqueTable()
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+ledger+" (msg TEXT)"); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Sink{}
	const lease = 300 * time.Millisecond
	g, err := gateway.New(s, &gateway.Options{Lease: lease, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	err = g.Lock(t.Context(), "long-tx", func(ctx context.Context) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+ledger+" (msg) VALUES ('long-tx')"); err != nil {
			return err
		}
		select { // a transaction three leases long, CompleteTx never called
		case <-time.After(3 * lease):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return tx.Commit()
	})
	if !errors.Is(err, gateway.ErrLeaseLost) {
		t.Fatalf("Lock = %v, want ErrLeaseLost: the renewal waited behind the transaction", err)
	}
	lost := logs.Records().Level(slog.LevelError).Containing("claim lost while the work ran")
	if len(lost) != 1 {
		t.Fatalf("ERROR lines for the lost claim = %d, want 1:\n%s", len(lost), logs.Records())
	}
	for _, part := range []string{"sqlstore: extend: SQLite is served here on 1 connection(s)", "call CompleteTx first", "context deadline exceeded"} {
		if !strings.Contains(lost[0].Attrs["error"], part) {
			t.Errorf("the lost claim's error %q does not say %q", lost[0].Attrs["error"], part)
		}
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+ledger).Scan(&n); err != nil || n != 0 {
		t.Fatalf("ledger rows = %d, %v; want 0: the cancelled body's transaction rolls back", n, err)
	}
	runs := 0
	if err := g.Lock(t.Context(), "long-tx", func(context.Context) error { runs++; return nil }); err != nil || runs != 1 {
		t.Fatalf("the redelivery = %v (ran %d), want nil and one run: the released key is not lost", err, runs)
	}
}
