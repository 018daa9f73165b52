package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// benchWorkers is how many messages are in flight at once, as in a push
// subscription with a few dozen concurrent deliveries per instance.
const benchWorkers = 32

// The benchmarks process fresh messages with 32 workers on one pool: the
// Idemgate sub-benchmark claims and completes each message through the
// store; the Baseline runs the two statements a hand-written guard would
// (INSERT … ON CONFLICT DO NOTHING, then UPDATE … WHERE key = $1) on a
// table of the same shape, same index, same database clock. The ratio of
// their ns/op is the cost of idemgate's guarantees.

func BenchmarkPostgreSQL(b *testing.B) { benchmarkMessages(b, postgresBackend, benchWorkers) }
func BenchmarkMariaDB(b *testing.B)    { benchmarkMessages(b, mariadbBackend, benchWorkers) }
func BenchmarkMySQL(b *testing.B)      { benchmarkMessages(b, mysqlBackend, benchWorkers) }

// BenchmarkSQLite uses one connection, as the package documentation
// advises; the 32 workers queue for it.
func BenchmarkSQLite(b *testing.B) { benchmarkMessages(b, sqliteBackend, 1) }

func benchmarkMessages(b *testing.B, be backend, conns int) {
	db := be.open(b, conns)
	s := newStore(b, db, be.dialect, nil)
	base := newBaseline(b, db, be.dialect)
	idemgate := func(ctx context.Context, key string) error {
		c, err := s.Claim(ctx, key, time.Minute)
		if err != nil {
			return err
		}
		if c.Status != store.Won {
			b.Fatalf("fresh message: Claim = %v", c.Status)
		}
		_, err = s.Complete(ctx, c)
		return err
	}
	baseline := func(ctx context.Context, key string) error {
		if _, err := db.ExecContext(ctx, base.insert, key, rand.Text()); err != nil {
			return err
		}
		_, err := db.ExecContext(ctx, base.update, key)
		return err
	}
	// Warm both up first (connections, prepared statements, caches), so
	// that neither pays for it inside its measurement.
	runMessages(b, 20*benchWorkers, idemgate)
	runMessages(b, 20*benchWorkers, baseline)
	b.Run("Idemgate", func(b *testing.B) { measure(b, idemgate) })
	b.Run("Baseline", func(b *testing.B) { measure(b, baseline) })
}

// measure processes b.N fresh messages and reports their rate.
func measure(b *testing.B, message func(ctx context.Context, key string) error) {
	b.ResetTimer()
	runMessages(b, b.N, message)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// runMessages processes n fresh messages with benchWorkers goroutines.
func runMessages(b *testing.B, n int, message func(ctx context.Context, key string) error) {
	prefix := rand.Text()[:10] + "-"
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range benchWorkers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := message(b.Context(), prefix+strconv.FormatInt(i, 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// baseline is the hand-written guard the benchmarks compare against.
type baseline struct {
	insert string // key, token
	update string // key
}

func newBaseline(b *testing.B, db *sql.DB, d sqlstore.Dialect) baseline {
	table := uniqueTable()
	var (
		r      *strings.Replacer
		create []string
		base   baseline
	)
	switch d {
	case sqlstore.PostgreSQL, sqlstore.SQLite:
		now, types := `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`, "text PRIMARY KEY, state smallint NOT NULL, fence bigint NOT NULL, token text NOT NULL, lease_until bigint NOT NULL, expires_at bigint NOT NULL"
		if d == sqlstore.SQLite {
			now, types = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`, "TEXT NOT NULL PRIMARY KEY, state INTEGER NOT NULL, fence INTEGER NOT NULL, token TEXT NOT NULL, lease_until INTEGER NOT NULL, expires_at INTEGER NOT NULL"
		}
		r = strings.NewReplacer("{T}", table, "{NOW}", now)
		create = []string{
			r.Replace(`CREATE TABLE {T} (key ` + types + `)`),
			r.Replace(`CREATE INDEX {T}_expires_at ON {T} (expires_at)`),
		}
		base.insert = r.Replace(`INSERT INTO {T} (key, state, fence, token, lease_until, expires_at) VALUES ($1, 1, 1, $2, {NOW} + 60000, {NOW} + 60000 + 3600000) ON CONFLICT DO NOTHING`)
		base.update = r.Replace(`UPDATE {T} SET state = 2, expires_at = {NOW} + 3600000 WHERE key = $1`)
	default: // MySQL, MariaDB
		r = strings.NewReplacer("{T}", table, "{NOW}", `((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6))) DIV 1000)`)
		create = []string{r.Replace(`CREATE TABLE {T} (key_text VARBINARY(255) NOT NULL PRIMARY KEY, state TINYINT NOT NULL, fence BIGINT NOT NULL, token BLOB NOT NULL, lease_until BIGINT NOT NULL, expires_at BIGINT NOT NULL, KEY (expires_at)) ENGINE = InnoDB`)}
		base.insert = r.Replace(`INSERT IGNORE INTO {T} (key_text, state, fence, token, lease_until, expires_at) VALUES (?, 1, 1, ?, {NOW} + 60000, {NOW} + 60000 + 3600000)`)
		base.update = r.Replace(`UPDATE {T} SET state = 2, expires_at = {NOW} + 3600000 WHERE key_text = ?`)
	}
	ctx := testenv.Context(b)
	for _, ddl := range create {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { db.ExecContext(testenv.Context(b), "DROP TABLE IF EXISTS "+table) })
	return base
}
