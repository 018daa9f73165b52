package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
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
	c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
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
	if got, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || got.Status != store.HeldByOther {
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
		err = s.CompletePgxTx(t.Context(), nil, store.Claim{Key: "k", Status: store.Won, Fence: 1})
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
	c := store.Claim{Key: "k", Status: store.Won, Fence: 1}
	if err := s.CompleteTx(t.Context(), nil, c); err == nil {
		t.Error("CompleteTx(nil *sql.Tx) must fail")
	}
	if err := s.CompletePgxTx(t.Context(), nil, c); err == nil {
		t.Error("CompletePgxTx(nil pgx.Tx) must fail")
	}
}

// MySQL counts only changed rows as affected unless the client sets
// CLIENT_FOUND_ROWS; CompleteTx must answer the same either way, for a
// transaction run again on its DONE record and for a stale fence.
func TestCompleteTxFoundRows(t *testing.T) {
	for _, b := range []backend{
		{name: "MariaDB", dialect: sqlstore.MariaDB, connector: mysqlConnector("interpolateParams=true&clientFoundRows=true")},
		{name: "MySQL", dialect: sqlstore.MySQL, connector: mysqlConnector("clientFoundRows=true")},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := testenv.Context(t)
			db := b.open(t, 2)
			s := b.store(t, db, nil)
			c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []error{nil, store.ErrFenced, store.ErrFenced} {
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

// A PostgreSQL transaction at REPEATABLE READ or SERIALIZABLE whose
// snapshot was taken before its own claim committed cannot see the claim:
// its UPDATE matches nothing. That is no proof of a takeover, and the
// claim still owns its record, so CompleteTx (and CompletePgxTx) must not
// answer ErrFenced, which the gateway acks; the claim must still complete
// afterwards. Both a record new since the snapshot (invisible to it) and one
// the snapshot shows at an older fence (a released claim, taken over).
func TestCompleteTxSnapshotBeforeClaim(t *testing.T) {
	pool := pgxPool(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	s := postgresBackend.store(t, db, nil)
	begin := map[string]func(ctx context.Context, t *testing.T, iso sql.IsolationLevel) (complete func(store.Claim) error, rollback func()){
		"sql": func(ctx context.Context, t *testing.T, iso sql.IsolationLevel) (func(store.Claim) error, func()) {
			tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM pg_class").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return func(c store.Claim) error { return s.CompleteTx(ctx, tx, c) }, func() { tx.Rollback() }
		},
		"pgx": func(ctx context.Context, t *testing.T, iso sql.IsolationLevel) (func(store.Claim) error, func()) {
			level := pgx.RepeatableRead
			if iso == sql.LevelSerializable {
				level = pgx.Serializable
			}
			tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_class").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return func(c store.Claim) error { return s.CompletePgxTx(ctx, tx, c) }, func() { tx.Rollback(ctx) }
		},
	}
	for _, api := range []string{"sql", "pgx"} {
		for _, iso := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable} {
			for _, record := range []string{"new", "taken-over"} {
				t.Run(api+"/"+iso.String()+"/"+record, func(t *testing.T) {
					ctx := testenv.Context(t)
					key := api + iso.String() + record
					if record == "taken-over" {
						old, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{})
						if err != nil {
							t.Fatal(err)
						}
						if err := s.Release(ctx, old); err != nil {
							t.Fatal(err)
						}
					}
					complete, rollback := begin[api](ctx, t, iso)
					c, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{}) // after the snapshot
					if err != nil || c.Status != store.Won {
						t.Fatalf("Claim = %v, %v; want won", c.Status, err)
					}
					err = complete(c)
					rollback()
					if err == nil || errors.Is(err, store.ErrFenced) {
						t.Fatalf("CompleteTx in a transaction whose snapshot predates the claim = %v; want an error, not ErrFenced: the claim still owns its record", err)
					}
					t.Logf("CompleteTx = %v", err)
					if got, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{}); err != nil || got.Status != store.HeldByOther {
						t.Fatalf("Claim after the refused CompleteTx = %v, %v; want held_by_other", got.Status, err)
					}
					if ok, err := s.Complete(ctx, c); !ok || err != nil {
						t.Fatalf("Complete after the refused CompleteTx = %v, %v; want true", ok, err)
					}
				})
			}
		}
	}
}

// The application's own *sql.DB on the store's SQLite file, a second
// handle: every message completes in a transaction of that handle, also
// once the store has prepared its statements on its own.
func TestCompleteTxSQLiteOtherHandle(t *testing.T) {
	ctx := testenv.Context(t)
	c := sqliteBackend.connector(t)
	s := newStore(t, openDB(t, c, 1), sqlstore.SQLite, nil)
	app := openDB(t, c, 1) // the application's handle on the same file
	if _, err := app.ExecContext(ctx, "CREATE TABLE ledger (msg TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"m1", "m2", "m3"} {
		cl, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{})
		if err != nil || cl.Status != store.Won {
			t.Fatalf("Claim(%s) = %v, %v; want won", key, cl.Status, err)
		}
		if err := insertCompleted(ctx, app, s, cl, "INSERT INTO ledger (msg) VALUES (?)", key); err != nil {
			t.Fatalf("message %s: CompleteTx on the application's handle: %v", key, err)
		}
		if ok, err := s.Complete(ctx, cl); !ok || err != nil { // the gateway's own
			t.Fatalf("message %s: Complete after the commit = %v, %v; want true", key, ok, err)
		}
	}
	var n int
	if err := app.QueryRowContext(ctx, "SELECT count(*) FROM ledger").Scan(&n); err != nil || n != 3 {
		t.Fatalf("ledger rows = %d, %v; want 3", n, err)
	}
}

// A business transaction run again after its first commit landed (its
// reply lost, then the caller's retry loop): the second CompleteTx meets
// the DONE record of its own fence and must fail with ErrFenced, so that
// the ledger row is written once; the gateway's Complete still answers
// true.
func TestCompleteTxRunTwiceBooksOnce(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t)
			db := b.open(t, 2)
			s := b.store(t, db, nil)
			ledger := uniqueTable()
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+ledger+" (msg VARCHAR(64) NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.ExecContext(testenv.Context(t), "DROP TABLE IF EXISTS "+ledger) })
			insert := "INSERT INTO " + ledger + " (msg) VALUES (?)"
			if b.dialect == sqlstore.PostgreSQL {
				insert = "INSERT INTO " + ledger + " (msg) VALUES ($1)"
			}
			c, err := s.Claim(ctx, "payment", time.Minute, store.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := insertCompleted(ctx, db, s, c, insert, c.Key); err != nil {
				t.Fatalf("first run: %v", err)
			}
			err = insertCompleted(ctx, db, s, c, insert, c.Key) // the retry after a lost reply
			if !errors.Is(err, store.ErrFenced) || !strings.Contains(err.Error(), "DONE already") {
				t.Errorf("the transaction run again = %v; want ErrFenced, saying the record is DONE already", err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+ledger).Scan(&n); err != nil || n != 1 {
				t.Errorf("ledger rows = %d, %v; want 1", n, err)
			}
			if ok, err := s.Complete(ctx, c); !ok || err != nil {
				t.Errorf("the gateway's Complete after both runs = %v, %v; want true", ok, err)
			}
		})
	}
}

// CompleteTx calls store.EnterTx before it sends anything: the gateway
// must stop renewing before the transaction locks the record's row.
func TestCompleteTxEntersBeforeItSends(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t)
			spy := &spyConnector{Connector: b.connector(t)}
			db := openDB(t, spy, 1)
			s := b.store(t, db, nil)
			c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			before, at := spy.stmts.Load(), int64(-1)
			c = store.OnEnterTx(c, store.TxWatcherFunc(func() { at = spy.stmts.Load() }))
			if err := s.CompleteTx(ctx, tx, c); err != nil {
				t.Fatal(err)
			}
			after := spy.stmts.Load()
			if at != before || after <= before {
				t.Errorf("statements: %d before CompleteTx, %d when it called EnterTx (-1: never), %d after; want EnterTx before the first", before, at, after)
			}
		})
	}
}

// A body that completes inside its transaction, CompleteTx first as
// documented, holds the record's row lock until it commits. The gateway's
// renewal must not queue behind that lock and cancel the body for a lease
// nobody can take over while the lock is held: once
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
