package sqlstore_test

import (
	"crypto/sha256"
	"database/sql"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestClaimMeetsUncommittedInsert stages the race that decides between two
// first Claims of a key: another Claim's insert is still uncommitted when
// ours runs. Ours must wait for it and then report HeldByOther with the
// other's lease. On PostgreSQL, for the Claim that writes only when it wins,
// this is the case where the statement's snapshot cannot see the row that
// ON CONFLICT found (see pgClaimNoWrite), so it also proves that the store
// runs the statement again.
func TestClaimMeetsUncommittedInsert(t *testing.T) {
	for _, tc := range []struct {
		b backend
		// nowMS is the database clock in epoch milliseconds.
		nowMS string
		// waiting counts the claim statements blocked on a row lock of the
		// table named by the argument.
		waiting string
	}{
		{postgresBackend, pgNowMS, pgClaimWaiting},
		{pgNoWriteBackend, pgNowMS, pgClaimWaiting},
		// InnoDB's lock tables are a cache that a tight poll never lets
		// refresh; the process list is live. A claim still running there is
		// blocked: it would otherwise take microseconds.
		{mariadbBackend, mysqlNowMS, mysqlClaimRunning},
		{mysqlBackend, mysqlNowMS, mysqlClaimRunning},
	} {
		t.Run(tc.b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := tc.b.open(t, 4)
			table := uniqueTable()
			s := tc.b.store(t, db, &sqlstore.Options{Table: table})

			// The other Claim's row, inserted by hand in a transaction that
			// stays open: CLAIMED, fence 1, leased for an hour.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var leaseUntil int64
			if err := tx.QueryRowContext(ctx, `SELECT `+tc.nowMS+` + 3600000`).Scan(&leaseUntil); err != nil {
				t.Fatal(err)
			}
			h := sha256.Sum256([]byte("k"))
			insert := `INSERT INTO ` + table + ` (key_hash, key_text, state, fence, token, lease_until, expires_at) VALUES (?, 'k', 1, 1, 'other', ?, ?)`
			if tc.b.dialect == sqlstore.PostgreSQL {
				insert = `INSERT INTO ` + table + ` (key_hash, key_text, state, fence, token, lease_until, expires_at) VALUES ($1, 'k', 1, 1, 'other', $2, $3)`
			}
			if _, err := tx.ExecContext(ctx, insert, h[:], leaseUntil, leaseUntil+3600000); err != nil {
				t.Fatal(err)
			}

			type result struct {
				c   store.Claim
				err error
			}
			done := make(chan result, 1)
			go func() {
				c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
				done <- result{c, err}
			}()
			waitFor(t, db, tc.waiting, table)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || r.c.Status != store.HeldByOther || r.c.Fence != 1 || r.c.LeaseUntil.UnixMilli() != leaseUntil {
				t.Fatalf("Claim racing an uncommitted insert = %v fence %d lease %v, %v; want HeldByOther fence 1 lease %v",
					r.c.Status, r.c.Fence, r.c.LeaseUntil, r.err, time.UnixMilli(leaseUntil))
			}
		})
	}
}

const (
	pgNowMS           = `(extract(epoch FROM statement_timestamp()) * 1000)::bigint`
	pgClaimWaiting    = `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`
	mysqlNowMS        = `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(3)) DIV 1000)`
	mysqlClaimRunning = `SELECT COUNT(*) FROM information_schema.processlist WHERE command = 'Query' AND info LIKE CONCAT('INSERT INTO %', ?, '%')`
)

// waitFor polls query, with arg, until it counts at least one row.
func waitFor(t *testing.T, db *sql.DB, query string, arg any) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		var n int
		if err := db.QueryRowContext(t.Context(), query, arg).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("the Claim never waited for the uncommitted insert")
}
