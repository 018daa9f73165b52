package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// A transaction on a database without the store's table fails and
// completes nothing: the record stays CLAIMED, and the claim can still
// complete on the right database.
func TestCompleteTxOnAnotherDatabase(t *testing.T) {
	ctx := testenv.Context(t)
	s := newStore(t, sqliteBackend.open(t, 1), sqlstore.SQLite, nil)
	other := sqliteBackend.open(t, 1) // another file, without the table
	c, err := s.Claim(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.CompleteTx(ctx, tx, c)
	tx.Rollback()
	if err == nil || errors.Is(err, store.ErrFenced) || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("CompleteTx in a transaction on another database = %v, want the database's \"no such table\" error, not ErrFenced", err)
	}
	if got, err := s.Claim(ctx, "k", time.Minute); err != nil || got.Status != store.HeldByOther {
		t.Fatalf("Claim after CompleteTx on another database = %v, %v; want held_by_other: nothing may be completed", got.Status, err)
	}
	if ok, err := s.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete after CompleteTx on another database = %v, %v; want true", ok, err)
	}
}

func TestCompletePgxTxRefusesOtherDialects(t *testing.T) {
	for _, d := range []sqlstore.Dialect{sqlstore.MySQL, sqlstore.MariaDB, sqlstore.SQLite} {
		s, err := sqlstore.New(db0, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		// db0 fails any connection, so an error that is not the dialect's
		// would come from a statement sent.
		err = s.CompletePgxTx(t.Context(), nil, store.Claim{Key: "k", Fence: 1})
		if err == nil || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("CompletePgxTx on a %v store = %v, want an error naming the dialect", d, err)
		}
	}
}

func TestCompleteTxRejectsNilTx(t *testing.T) {
	s, err := sqlstore.New(db0, sqlstore.PostgreSQL, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := store.Claim{Key: "k", Fence: 1}
	if err := s.CompleteTx(t.Context(), nil, c); err == nil {
		t.Error("CompleteTx(nil *sql.Tx) must fail")
	}
	if err := s.CompletePgxTx(t.Context(), nil, c); err == nil {
		t.Error("CompletePgxTx(nil pgx.Tx) must fail")
	}
}

// MySQL counts only changed rows as affected unless the client sets
// CLIENT_FOUND_ROWS; CompleteTx must answer the same either way, for the
// retry on a DONE record (no row changes) and for a stale fence.
func TestCompleteTxFoundRows(t *testing.T) {
	for _, b := range []backend{
		{name: "MariaDB", dialect: sqlstore.MariaDB, connector: mysqlConnector("interpolateParams=true&clientFoundRows=true")},
		{name: "MySQL", dialect: sqlstore.MySQL, connector: mysqlConnector("clientFoundRows=true")},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := testenv.Context(t)
			db := b.open(t, 2)
			s := b.store(t, db, nil)
			c, err := s.Claim(ctx, "k", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []error{nil, nil, store.ErrFenced} {
				if i == 2 {
					c.Fence++ // a fence that never owned the record
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := s.CompleteTx(ctx, tx, c)
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if !errors.Is(got, want) || (want == nil) != (got == nil) {
					t.Errorf("CompleteTx #%d = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

// insertCompleted is the transactional write of a message: in one
// transaction, CompleteTx first, then the business INSERT with args; it
// commits when both succeed and rolls back otherwise.
func insertCompleted(ctx context.Context, db *sql.DB, s *sqlstore.Store, c store.Claim, insert string, args ...any) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := s.CompleteTx(ctx, tx, c); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, insert, args...); err != nil {
		return err
	}
	return tx.Commit()
}
