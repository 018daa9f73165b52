package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/benchratio"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// benchWorkers is how many messages are in flight at once, as in a push
// subscription with a few dozen concurrent deliveries per instance.
const benchWorkers = 32

// The benchmarks process fresh messages with 32 workers on one pool: the
// subject claims and completes each message through the store; the
// baseline runs the two statements a hand-written guard would (INSERT …
// ON CONFLICT DO NOTHING, then UPDATE … WHERE key = $1) on a table of the
// same shape, same index, same database clock. They alternate in rounds
// (benchratio.Compare); the ratio of their rates is the cost of idemgate's
// guarantees.

func BenchmarkPostgreSQL(b *testing.B) { benchmarkMessages(b, postgresBackend, benchWorkers) }
func BenchmarkMariaDB(b *testing.B)    { benchmarkMessages(b, mariadbBackend, benchWorkers) }
func BenchmarkMySQL(b *testing.B)      { benchmarkMessages(b, mysqlBackend, benchWorkers) }

// BenchmarkSQLite uses one connection, as the package documentation
// advises; the 32 workers queue for it.
func BenchmarkSQLite(b *testing.B) { benchmarkMessages(b, sqliteBackend, 1) }

func benchmarkMessages(b *testing.B, be backend, conns int) {
	benchmarkMessagesOn(b, be, be.open(b, conns), benchWorkers, 32*benchWorkers)
}

// benchmarkMessagesOn compares the two guards on db, with workers
// goroutines in rounds of round messages.
func benchmarkMessagesOn(b *testing.B, be backend, db *sql.DB, workers, round int) {
	s := newStore(b, db, be.dialect, nil)
	base := newBaseline(b, db, be.dialect)
	prefix := rand.Text()[:10] + "-"
	idemgate := func(ctx context.Context, i int64) error {
		c, err := s.Claim(ctx, prefix+strconv.FormatInt(i, 10), time.Minute, store.ClaimOptions{})
		if err != nil {
			return err
		}
		if c.Status != store.Won {
			return fmt.Errorf("fresh message: Claim = %v", c.Status)
		}
		_, err = s.Complete(ctx, c)
		return err
	}
	baseline := func(ctx context.Context, i int64) error {
		key := prefix + strconv.FormatInt(i, 10)
		if _, err := db.ExecContext(ctx, base.insert, key, rand.Text()); err != nil {
			return err
		}
		_, err := db.ExecContext(ctx, base.update, key)
		return err
	}
	b.Run("Ratio", func(b *testing.B) {
		benchratio.Compare(b, workers, round, idemgate, baseline)
	})
}

// BenchmarkFloor compares idemgate with the floor, the raw statements of
// a hand-written guard on the same driver and pool, alternated in rounds
// (benchratio.Compare), per dialect, at 1 and 32 workers:
//
//   - Fresh: Claim and Complete of a new key, against INSERT … ON CONFLICT
//     DO NOTHING (MySQL family: INSERT IGNORE) and UPDATE, as in
//     BenchmarkPostgreSQL.
//   - Duplicate: a Claim of a key already DONE, against the same INSERT
//     on a key already there, which writes nothing either.
//
// SQLite runs on one connection, as the package documentation advises.
func BenchmarkFloor(b *testing.B) {
	for _, be := range []backend{postgresBackend, mariadbBackend, sqliteBackend} {
		b.Run(be.name, func(b *testing.B) {
			conns := benchWorkers
			if be.dialect == sqlstore.SQLite {
				conns = 1
			}
			db := be.open(b, conns)
			for _, workers := range []int{1, benchWorkers} {
				b.Run(fmt.Sprintf("Fresh/Workers=%d", workers), func(b *testing.B) {
					benchmarkMessagesOn(b, be, db, workers, 32*workers)
				})
				b.Run(fmt.Sprintf("Duplicate/Workers=%d", workers), func(b *testing.B) {
					benchmarkDuplicatesOn(b, be, db, workers, 32*workers)
				})
			}
		})
	}
}

// duplicateKeys is how many DONE keys the duplicate benchmarks cycle
// through: enough that 32 workers rarely meet on one row.
const duplicateKeys = 1024

// benchmarkDuplicatesOn compares a duplicate's Claim with the floor's
// INSERT of a key already there, with workers goroutines in rounds of
// round messages.
func benchmarkDuplicatesOn(b *testing.B, be backend, db *sql.DB, workers, round int) {
	ctx := testenv.Context(b)
	s := newStore(b, db, be.dialect, nil)
	base := newBaseline(b, db, be.dialect)
	prefix := rand.Text()[:10] + "-"
	// Make the DONE keys, and the floor's rows, 32 at a time.
	errs := make([]error, benchWorkers)
	var wg sync.WaitGroup
	for w := range benchWorkers {
		wg.Go(func() {
			for i := w; i < duplicateKeys && errs[w] == nil; i += benchWorkers {
				key := prefix + strconv.Itoa(i)
				c, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{})
				if err == nil {
					_, err = s.Complete(ctx, c)
				}
				if err == nil {
					_, err = db.ExecContext(ctx, base.insert, key, rand.Text())
				}
				errs[w] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	idemgate := func(ctx context.Context, i int64) error {
		c, err := s.Claim(ctx, prefix+strconv.FormatInt(i%duplicateKeys, 10), time.Minute, store.ClaimOptions{})
		if err == nil && c.Status != store.AlreadyDone {
			err = fmt.Errorf("duplicate message: Claim = %v", c.Status)
		}
		return err
	}
	baseline := func(ctx context.Context, i int64) error {
		res, err := db.ExecContext(ctx, base.insert, prefix+strconv.FormatInt(i%duplicateKeys, 10), rand.Text())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 0 {
			return fmt.Errorf("duplicate message: INSERT affected %d rows, %v", n, err)
		}
		return nil
	}
	b.Run("Ratio", func(b *testing.B) {
		benchratio.Compare(b, workers, round, idemgate, baseline)
	})
}

// baseline is the hand-written guard the benchmarks compare against.
type baseline struct {
	insert string // key, token
	update string // key
}

func newBaseline(b testing.TB, db *sql.DB, d sqlstore.Dialect) baseline {
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

// BenchmarkCompleteTxPostgreSQL compares the two ways a fresh message can
// write a business row and complete its claim, each after its Claim: the
// subject in one transaction (BEGIN, CompleteTx, the INSERT, COMMIT: one
// commit, four round trips), the baseline as two statements that each
// commit on their own (the INSERT, then Complete: two commits, two round
// trips), as a body under Lock does without CompleteTx. 32 workers, rounds
// of 1024 messages (benchratio.Compare).
func BenchmarkCompleteTxPostgreSQL(b *testing.B) {
	benchmarkCompleteTxOn(b, postgresBackend.open(b, benchWorkers), benchWorkers, 32*benchWorkers)
}

// BenchmarkCompleteTxNetworkPostgreSQL is BenchmarkCompleteTxPostgreSQL
// behind the Toxiproxy proxy of BenchmarkNetworkPostgreSQL, where round
// trips rather than commits set the pace.
func BenchmarkCompleteTxNetworkPostgreSQL(b *testing.B) {
	for _, d := range testenv.NetworkDelays() {
		b.Run(d.Name, func(b *testing.B) {
			pr := newProxied(b, postgresBackend)
			pr.proxy.Latency(b, testenv.Upstream, d.OneWay)
			pr.proxy.Latency(b, testenv.Downstream, d.OneWay)
			benchmarkCompleteTxOn(b, openDB(b, pr.c, networkWorkers), networkWorkers, 64*networkWorkers)
		})
	}
}

func benchmarkCompleteTxOn(b *testing.B, db *sql.DB, workers, round int) {
	ctx := testenv.Context(b)
	s := newStore(b, db, sqlstore.PostgreSQL, nil)
	ledger := uniqueTable()
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+ledger+` (msg text NOT NULL, amount bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.ExecContext(testenv.Context(b), "DROP TABLE IF EXISTS "+ledger) })
	insert := `INSERT INTO ` + ledger + ` (msg, amount) VALUES ($1, $2)`
	prefix := rand.Text()[:10] + "-"
	claim := func(ctx context.Context, i int64) (store.Claim, error) {
		c, err := s.Claim(ctx, prefix+strconv.FormatInt(i, 10), time.Minute, store.ClaimOptions{})
		if err == nil && c.Status != store.Won {
			err = fmt.Errorf("fresh message: Claim = %v", c.Status)
		}
		return c, err
	}
	inTx := func(ctx context.Context, i int64) error {
		c, err := claim(ctx, i)
		if err != nil {
			return err
		}
		return insertCompleted(ctx, db, s, c, insert, c.Key, i)
	}
	separate := func(ctx context.Context, i int64) error {
		c, err := claim(ctx, i)
		if err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, insert, c.Key, i); err != nil {
			return err
		}
		ok, err := s.Complete(ctx, c)
		if err == nil && !ok {
			err = errors.New("Complete of a fresh claim answered false")
		}
		return err
	}
	b.Run("Ratio", func(b *testing.B) {
		benchratio.Compare(b, workers, round, inTx, separate)
	})
}

// BenchmarkCompleteTxSQLite is a message completed in a transaction on
// SQLite, set up as the package documentation advises (one connection):
// Claim, BEGIN, CompleteTx, COMMIT, then the gateway's own Complete. It
// measures what sending CompleteTx's statement as text costs, where a
// statement prepared on the store's handle could not serve a transaction
// of another handle.
func BenchmarkCompleteTxSQLite(b *testing.B) {
	ctx := testenv.Context(b)
	db := sqliteBackend.open(b, 1)
	s := newStore(b, db, sqlstore.SQLite, nil)
	prefix := rand.Text()[:10] + "-"
	for i := 0; b.Loop(); i++ {
		c, err := s.Claim(ctx, prefix+strconv.Itoa(i), time.Minute, store.ClaimOptions{})
		if err != nil {
			b.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.CompleteTx(ctx, tx, c); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		if ok, err := s.Complete(ctx, c); !ok || err != nil {
			b.Fatalf("Complete after the commit = %v, %v", ok, err)
		}
	}
}

// networkWorkers is how many messages the BenchmarkNetwork benchmarks keep
// in flight: few, so that the proxy, which runs in the benchmark's own
// process on the same cores, has CPU to spare and the round trips set the
// pace.
const networkWorkers = 8

// BenchmarkNetworkPostgreSQL is BenchmarkPostgreSQL with a Toxiproxy proxy
// in front of the server that delays every byte each way by 250µs (a round
// trip within a zone, Cloud Run to Cloud SQL) or by 2ms, so that round
// trips, not the CPU of a loopback server, set the pace.
func BenchmarkNetworkPostgreSQL(b *testing.B) { benchmarkNetwork(b, postgresBackend) }

// BenchmarkNetworkMariaDB is BenchmarkMariaDB behind the same proxy.
func BenchmarkNetworkMariaDB(b *testing.B) { benchmarkNetwork(b, mariadbBackend) }

func benchmarkNetwork(b *testing.B, be backend) {
	for _, d := range testenv.NetworkDelays() {
		b.Run(d.Name, func(b *testing.B) {
			pr := newProxied(b, be)
			pr.proxy.Latency(b, testenv.Upstream, d.OneWay)
			pr.proxy.Latency(b, testenv.Downstream, d.OneWay)
			benchmarkMessagesOn(b, be, openDB(b, pr.c, networkWorkers), networkWorkers, 64*networkWorkers)
		})
	}
}
