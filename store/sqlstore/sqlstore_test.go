package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
	"github.com/idemgate/idemgate/store/storetest"
)

// tick is the short lease and ttl of the conformance suite on the
// database's clock: long enough for a handful of statements on a loaded
// machine.
const tick = 150 * time.Millisecond

func TestConformance(t *testing.T) {
	// The MySQL family once more, with the driver's default server-side
	// prepared statements instead of interpolated parameters.
	// PostgreSQL once more on the Claim it switches to above READ
	// COMMITTED.
	// PostgreSQL once more with the transactional cases run through pgx's
	// own API (CompletePgxTx).
	more := []backend{
		{name: "MariaDB-prepared", dialect: sqlstore.MariaDB, connector: mysqlConnector("")},
		{name: "MySQL-prepared", dialect: sqlstore.MySQL, connector: mysqlConnector("")},
		pgNoWriteBackend,
		{name: "PostgreSQL-pgxtx", dialect: sqlstore.PostgreSQL, connector: postgresConnector, pgxTx: true},
	}
	for _, b := range append(backends, more...) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conns := 16
			if b.dialect == sqlstore.SQLite {
				conns = 1 // as the package documentation advises
			}
			var (
				db   *sql.DB
				inTx inTxFunc
			)
			if b.pgxTx {
				// As docs/stores/sql.md advises: the store's *sql.DB on
				// the application's pgx pool.
				pool := pgxPool(t)
				db, inTx = stdlib.OpenDBFromPool(pool), inPgxTx(pool)
				t.Cleanup(func() { db.Close() })
			} else {
				db = b.open(t, conns)
				inTx = inSQLTx(db)
			}
			storetest.Run(t, storetest.Config{
				NewStore: func(t testing.TB, s storetest.Setup) store.Store {
					return b.store(t, db, &sqlstore.Options{TTL: s.TTL})
				},
				RealClock: true,
				Tick:      tick,
				EdgeLease: 2 * time.Millisecond,
				InTx:      inTx,
				Delete:    purge,
			})
		})
	}
}

// purge is storetest.Config.Delete: PurgeExpired deletes the expired
// record, as a purge job would.
func purge(t testing.TB, st store.Store, key string) {
	n, err := st.(*sqlstore.Store).PurgeExpired(context.Background(), 1000)
	if err != nil || n != 1 {
		t.Fatalf("PurgeExpired = %d, %v; want the one expired record deleted", n, err)
	}
}

// inTxFunc is the type of storetest.Config.InTx.
type inTxFunc = func(ctx context.Context, st store.Store, fn func(complete func(store.Claim) error) error) error

// inSQLTx runs the suite's transactions on db, completing with CompleteTx.
func inSQLTx(db *sql.DB) inTxFunc {
	return func(ctx context.Context, st store.Store, fn func(complete func(store.Claim) error) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(func(c store.Claim) error { return st.(*sqlstore.Store).CompleteTx(ctx, tx, c) }); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		return tx.Commit()
	}
}

// inPgxTx runs the suite's transactions on pool, completing with
// CompletePgxTx.
func inPgxTx(pool *pgxpool.Pool) inTxFunc {
	return func(ctx context.Context, st store.Store, fn func(complete func(store.Claim) error) error) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		if err := fn(func(c store.Claim) error { return st.(*sqlstore.Store).CompletePgxTx(ctx, tx, c) }); err != nil {
			return errors.Join(err, tx.Rollback(ctx))
		}
		return tx.Commit(ctx)
	}
}

func TestNewRejectsBadTableNames(t *testing.T) {
	for _, name := range []string{
		"x; DROP TABLE y",
		`a"b`,
		"a`b",
		"a'b",
		" ",
		"1abc",
		"a-b",
		"a.b.c",
		".a",
		"a.",
		"tábla",
		"a\x00b",
		strings.Repeat("a", 200),
		"s." + strings.Repeat("a", 49),
	} {
		for _, d := range []sqlstore.Dialect{sqlstore.PostgreSQL, sqlstore.MySQL, sqlstore.MariaDB, sqlstore.SQLite} {
			_, err := sqlstore.New(db0, d, &sqlstore.Options{Table: name})
			if err == nil || !strings.HasPrefix(err.Error(), "sqlstore: ") {
				t.Errorf("New(%v, Table %.30q) error = %v, want a \"sqlstore: …\" error", d, name, err)
			}
		}
	}
}

func TestNewAcceptsTableNames(t *testing.T) {
	for _, name := range []string{"", "idemgate_records", "T1", "_x", "app.records", strings.Repeat("a", 48), "select"} {
		if _, err := sqlstore.New(db0, sqlstore.PostgreSQL, &sqlstore.Options{Table: name}); err != nil {
			t.Errorf("New(Table %q) = %v, want no error", name, err)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		new  func() (*sqlstore.Store, error)
	}{
		{"nil db", func() (*sqlstore.Store, error) { return sqlstore.New(nil, sqlstore.PostgreSQL, nil) }},
		{"zero dialect", func() (*sqlstore.Store, error) { return sqlstore.New(db0, 0, nil) }},
		{"unknown dialect", func() (*sqlstore.Store, error) { return sqlstore.New(db0, 99, nil) }},
		{"negative TTL", func() (*sqlstore.Store, error) {
			return sqlstore.New(db0, sqlstore.SQLite, &sqlstore.Options{TTL: -time.Second})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.new(); err == nil || !strings.HasPrefix(err.Error(), "sqlstore: ") {
				t.Errorf("New = %v, want a \"sqlstore: …\" error", err)
			}
		})
	}
}

func TestNewDoesNotMutateOptions(t *testing.T) {
	o := sqlstore.Options{}
	if _, err := sqlstore.New(db0, sqlstore.SQLite, &o); err != nil {
		t.Fatal(err)
	}
	if o != (sqlstore.Options{}) {
		t.Errorf("New changed the caller's options to %+v", o)
	}
}

func TestShortLeaseRejected(t *testing.T) {
	s, err := sqlstore.New(db0, sqlstore.SQLite, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(t.Context(), "k", time.Microsecond, store.ClaimOptions{}); err == nil {
		t.Error("Claim with a lease under 1ms must fail")
	}
	if _, err := s.Extend(t.Context(), store.Claim{Key: "k", Status: store.Won, Fence: 1}, 0); err == nil {
		t.Error("Extend with a zero lease must fail")
	}
}

// TestLongFingerprintRejectedWithoutIO checks that a fingerprint longer than
// store.MaxFingerprintLen is refused before the store reaches the database
// (db0 fails any connection).
func TestLongFingerprintRejectedWithoutIO(t *testing.T) {
	for _, d := range []sqlstore.Dialect{sqlstore.PostgreSQL, sqlstore.MySQL, sqlstore.MariaDB, sqlstore.SQLite} {
		s, err := sqlstore.New(db0, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: make([]byte, store.MaxFingerprintLen+1)}
		if _, err := s.Claim(ctx, "k", time.Minute, opts); !errors.Is(err, store.ErrInvalidFingerprint) {
			t.Errorf("%v: Claim with a %d-byte fingerprint = %v, want store.ErrInvalidFingerprint", d, store.MaxFingerprintLen+1, err)
		}
	}
}
