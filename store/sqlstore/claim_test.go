package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// A stepping clock moves one millisecond forward on every reading, so a test
// can place the instant a lease lapses between two readings of one
// statement, and can count the readings.
type steppingClock struct {
	expr string // the clock, as a SQL expression
	// set makes the next reading return ms; last returns the latest
	// reading.
	set  func(t *testing.T, ms int64)
	last func(t *testing.T) int64
}

// pgSteppingClock is a sequence read by a volatile function, in a schema
// of its own.
func pgSteppingClock(t *testing.T, db *sql.DB) steppingClock {
	schema := uniqueTable()
	for _, ddl := range []string{
		`CREATE SCHEMA ` + schema,
		`CREATE SEQUENCE ` + schema + `.tick`,
		`CREATE FUNCTION ` + schema + `.now() RETURNS bigint VOLATILE LANGUAGE sql AS $$ SELECT nextval('` + schema + `.tick') $$`,
	} {
		if _, err := db.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`) })
	return steppingClock{
		expr: schema + `.now()`,
		set: func(t *testing.T, ms int64) {
			if _, err := db.ExecContext(t.Context(), `SELECT setval('`+schema+`.tick', $1, false)`, ms); err != nil {
				t.Fatal(err)
			}
		},
		last: func(t *testing.T) int64 {
			var ms int64
			if err := db.QueryRowContext(t.Context(), `SELECT last_value FROM `+schema+`.tick`).Scan(&ms); err != nil {
				t.Fatal(err)
			}
			return ms
		},
	}
}

// mysqlSteppingClock is a session variable, incremented where it is read:
// db must hold one connection.
func mysqlSteppingClock(t *testing.T, db *sql.DB) steppingClock {
	return steppingClock{
		expr: `(@igt_clock := @igt_clock + 1)`,
		set: func(t *testing.T, ms int64) {
			if _, err := db.ExecContext(t.Context(), `SET @igt_clock = ?`, ms-1); err != nil {
				t.Fatal(err)
			}
		},
		last: func(t *testing.T) int64 {
			var ms int64
			if err := db.QueryRowContext(t.Context(), `SELECT @igt_clock`).Scan(&ms); err != nil {
				t.Fatal(err)
			}
			return ms
		},
	}
}

// steppingBackends are the backends whose clock moves within a statement,
// each with its stepping clock. (SQLite's does not:
// TestSQLiteClockFixedPerStep.)
var steppingBackends = []struct {
	b     backend
	clock func(*testing.T, *sql.DB) steppingClock
}{
	{postgresBackend, pgSteppingClock},
	{pgNoWriteBackend, pgSteppingClock},
	{mariadbBackend, mysqlSteppingClock},
	{mysqlBackend, mysqlSteppingClock},
}

// row is a record as the table holds it.
type row struct {
	state, fence          int64
	token                 string
	leaseUntil, expiresAt int64
	fingerprint           string // "" for NULL
}

// TestClaimDecidesOnce runs the real Claim statement against a record whose
// holder's lease lapses while the statement runs: the stepping clock is
// placed k readings before the lapse, for every k up to well past the
// statement's readings. Whatever k, the statement must decide once: either
// the caller takes the record over and every column is the new claim's
// (fence bumped, the caller's token and fingerprint, a lease and expiry
// counted from a reading at which the old lease had lapsed), or it is held
// and the row is untouched. A statement that tests for a takeover in each column
// separately, on a clock read each time, writes a row that is half the old
// claim and half the new one at some k.
func TestClaimDecidesOnce(t *testing.T) {
	for _, tc := range steppingBackends {
		t.Run(tc.b.name, func(t *testing.T) {
			t.Parallel()
			const (
				lapse = int64(1_000_000_000) // the holder's leaseUntil
				ttl   = int64(3_600_000)
				lease = int64(1000)
			)
			db := tc.b.open(t, 1)
			table := uniqueTable()
			s := tc.b.store(t, db, &sqlstore.Options{Table: table, TTL: time.Duration(ttl) * time.Millisecond})
			clock := tc.clock(t, db)
			sqlstore.UseClock(s, clock.expr)
			ph := func(q string) string { // MySQL's placeholders
				if tc.b.dialect == sqlstore.PostgreSQL {
					return q
				}
				return strings.NewReplacer("$1", "?", "$2", "?", "$3", "?", "$4", "?").Replace(q)
			}
			read := func(key string) row {
				var r row
				err := db.QueryRowContext(t.Context(), ph(`SELECT state, fence, token, lease_until, expires_at, COALESCE(fingerprint, '') FROM `+table+` WHERE key_text = $1`), key).
					Scan(&r.state, &r.fence, &r.token, &r.leaseUntil, &r.expiresAt, &r.fingerprint)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			holder := row{state: 1, fence: 5, token: "holder", leaseUntil: lapse, expiresAt: lapse + ttl, fingerprint: "holder-fp"}
			var won, held int
			for k := range int64(24) {
				key := fmt.Sprintf("k%d", k)
				h := sha256.Sum256([]byte(key))
				if _, err := db.ExecContext(t.Context(), ph(`INSERT INTO `+table+` (key_hash, key_text, state, fence, token, lease_until, expires_at, fingerprint) VALUES ($1, $2, 1, 5, 'holder', $3, `+fmt.Sprint(lapse+ttl)+`, $4)`),
					h[:], key, lapse, []byte(holder.fingerprint)); err != nil {
					t.Fatal(err)
				}
				clock.set(t, lapse-k)
				token := fmt.Sprintf("contender-%d", k)
				fp := fmt.Sprintf("contender-fp-%d", k)
				ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: []byte(fp), Token: token}
				c, err := s.Claim(ctx, key, time.Duration(lease)*time.Millisecond, opts)
				if err != nil {
					t.Fatal(err)
				}
				last, got := clock.last(t), read(key)
				switch c.Status {
				case store.Won:
					won++
					from := got.leaseUntil - lease // the reading the new lease counts from
					// The fence is the clock of the win in microseconds: on
					// PostgreSQL the lease's reading, on MySQL a reading of
					// its own, taken under the row lock before the lease's.
					want := row{state: 1, fence: c.Fence, token: token, leaseUntil: c.LeaseUntil.UnixMilli(), expiresAt: c.LeaseUntil.UnixMilli() + ttl, fingerprint: fp}
					if c.Fence <= holder.fence || c.Fence > from*1000 || c.Fence < (lapse-k)*1000 {
						t.Errorf("k=%d: Won fence %d, want the clock of the win in microseconds, in [%d, %d]", k, c.Fence, (lapse-k)*1000, from*1000)
					}
					if got != want || string(c.Fingerprint) != fp {
						t.Errorf("k=%d: Claim = Won fence %d lease %d fingerprint %q, row %+v; want the new claim in every column, %+v (a takeover decides once)", k, c.Fence, c.LeaseUntil.UnixMilli(), c.Fingerprint, got, want)
					}
					if from < lapse || from != last {
						t.Errorf("k=%d: Won lease counts from reading %d, want the statement's last reading %d, at which the old lease (until %d) had lapsed", k, from, last, lapse)
					}
				case store.HeldByOther:
					held++
					if c.Fence != holder.fence || c.LeaseUntil.UnixMilli() != lapse || got != holder || string(c.Fingerprint) != holder.fingerprint {
						t.Errorf("k=%d: Claim = HeldByOther fence %d lease %d fingerprint %q, row %+v; want the holder's claim untouched, %+v", k, c.Fence, c.LeaseUntil.UnixMilli(), c.Fingerprint, got, holder)
					}
					if last >= lapse {
						t.Errorf("k=%d: HeldByOther although the statement read the clock at %d, past the holder's lease %d", k, last, lapse)
					}
				default:
					t.Errorf("k=%d: Claim = %v, want Won or HeldByOther", k, c.Status)
				}
			}
			if won == 0 || held == 0 {
				t.Errorf("%d takeovers and %d HeldByOther over the positions of the lapse; want both", won, held)
			}
		})
	}
}

// TestSQLiteClockFixedPerStep confirms what SQLite's Claim relies on
// without a sub-select of its own: 'now' is read once per sqlite3_step, so
// every reading in one statement is the same, however long it runs.
func TestSQLiteClockFixedPerStep(t *testing.T) {
	db := sqliteBackend.open(t, 1)
	const now = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`
	start := time.Now()
	var lo, hi, n int64
	err := db.QueryRowContext(t.Context(), `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 30000)
SELECT min(`+now+`), max(`+now+`), count(*) FROM c`).Scan(&lo, &hi, &n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows, two readings each, in %v", n, time.Since(start))
	if lo != hi {
		t.Errorf("readings of 'now' in one statement range over %d ms, want one instant", hi-lo)
	}
}

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
