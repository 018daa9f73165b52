package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestDuplicateClaimWritesNothing claims and completes a key (or fails it
// for good: a FAILED record is as final), then claims it again, and checks
// on each dialect that the duplicate Claim wrote nothing, by what the
// database itself counts:
//
//   - PostgreSQL (both Claim forms): the row keeps its version (xmin,
//     ctid) and takes no lock (xmax), and the statement, run under EXPLAIN
//     (ANALYZE, WAL), writes no WAL record.
//   - MariaDB and the MySQL dialect: the connection's Handler_update and
//     Handler_delete do not move.
//   - SQLite: the connection's total_changes() does not move, another
//     connection's PRAGMA data_version does not either (no commit changed
//     the file), and the Claim answers while another connection holds the
//     write lock.
//
// Each store runs on a pool of one connection, so that per-session
// counters are the store's own.
func TestDuplicateClaimWritesNothing(t *testing.T) {
	for _, b := range []backend{postgresBackend, pgNoWriteBackend, mariadbBackend, mysqlBackend, sqliteBackend} {
		for _, want := range []store.Status{store.AlreadyDone, store.AlreadyFailed} {
			t.Run(b.name+"/"+want.String(), func(t *testing.T) { duplicateClaimWritesNothing(t, b, want) })
		}
	}
}

func duplicateClaimWritesNothing(t *testing.T, b backend, want store.Status) {
	t.Parallel()
	ctx := testenv.Context(t)
	var (
		db     *sql.DB
		other  *sql.DB // SQLite: a connection that holds the write lock
		watch  *sql.DB // SQLite: a connection that watches data_version
		counts func() string
	)
	table := uniqueTable()
	if b.dialect == sqlstore.SQLite {
		c, err := sqlite.NewConnector(filepath.Join(t.TempDir(), "idemgate.db") + sqliteDSN)
		if err != nil {
			t.Fatal(err)
		}
		db, other, watch = openDB(t, c, 1), openDB(t, c, 1), openDB(t, c, 1)
	} else {
		db = b.open(t, 1)
	}
	s := b.store(t, db, &sqlstore.Options{Table: table})
	switch b.dialect {
	case sqlstore.PostgreSQL:
		counts = func() string {
			return scanString(t, db, `SELECT xmin::text || ' ' || xmax::text || ' ' || ctid::text FROM `+table)
		}
	case sqlstore.SQLite:
		counts = func() string {
			return scanString(t, db, `SELECT total_changes()`) + " " + scanString(t, watch, `PRAGMA data_version`)
		}
	default:
		counts = func() string {
			return scanString(t, db, `SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME) FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME IN ('HANDLER_UPDATE', 'HANDLER_DELETE')`)
		}
	}

	c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("fresh Claim = %+v, %v; want Won", c, err)
	}
	if want == store.AlreadyFailed {
		if _, failed, err := s.Fail(ctx, c, store.Failure{Reason: "bad", Final: true}); !failed || err != nil {
			t.Fatalf("Fail = %v, %v; want FAILED", failed, err)
		}
	} else if ok, err := s.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete = %v, %v; want true", ok, err)
	}
	// The MySQL family: a first duplicate warms the connection (the
	// driver's and the server's first-use work is no write, but it
	// need not be measured).
	if _, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}

	if b.dialect == sqlstore.SQLite {
		// Another connection holds the write lock for the whole
		// duplicate Claim; a Claim that wanted it would wait out
		// the busy timeout and fail.
		tx, err := other.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (key_hash, key_text, state, fence, token, lease_until, expires_at) VALUES (x'00', 'lock', 2, 1, '', 0, 0)`); err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
	}
	before := counts()
	claimCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	d, err := s.Claim(claimCtx, "k", time.Minute, store.ClaimOptions{})
	cancel()
	if err != nil || d.Status != want || d.Fence != c.Fence {
		t.Fatalf("duplicate Claim = %+v, %v; want %v at fence %d", d, err, want, c.Fence)
	}
	if after := counts(); after != before {
		t.Errorf("a duplicate Claim wrote: %s before, %s after", before, after)
	} else {
		t.Logf("%s: %s before and after", b.name, before)
	}

	if b.dialect == sqlstore.PostgreSQL {
		n, err := sqlstore.ClaimWAL(ctx, s, "k", "another-token", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("EXPLAIN (ANALYZE, WAL) of a duplicate Claim: %d WAL records, want 0", n)
		}
		// The check can fail: a fresh key's Claim writes.
		if n, err := sqlstore.ClaimWAL(ctx, s, "fresh", "another-token", time.Minute); err != nil || n == 0 {
			t.Errorf("EXPLAIN (ANALYZE, WAL) of a fresh Claim: %d WAL records, %v; want some", n, err)
		}
	}
}

// scanString runs q, which answers one value, and returns it as text.
func scanString(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	var v any
	if err := db.QueryRowContext(testenv.Context(t), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}
