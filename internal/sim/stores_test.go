package sim_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/idemgate/idemgate/internal/sim"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// On a real store fake time cannot drive the server's clock, so the same
// scenarios run in real time with short leases, a few seeds at once, for a
// budget of wall time per store.

// realTiming is the real clock's scale: the lease leaves a loaded machine
// room to schedule renewals, the ttl lets a stall outlive it in seconds.
var realTiming = sim.Timing{Lease: 400 * time.Millisecond, TTL: 2 * time.Second, Quick: true}

// realBudget is how long each store's run may start new seeds.
const realBudget = 4 * time.Second

// runReal runs seeds on backends made by open (one each), realParallel at a time,
// until the budget is spent (or every seed of -sim.seeds / -sim.seed ran).
func runReal(t *testing.T, open func(t *testing.T) *sim.Backend) {
	const realParallel = 4
	start := time.Now()
	list := seeds(1 << 20)
	explicit := *seedFlag != 0 || *seedsFlag > 0
	var (
		mu     sync.Mutex
		failed *sim.Result
		ran    int
		wg     sync.WaitGroup
	)
	type job struct {
		seed uint64
		b    *sim.Backend
	}
	next := make(chan job)
	for range realParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				seed := j.seed
				res := sim.Run(sim.NewScenario(seed, true), j.b)
				mu.Lock()
				ran++
				if res.Failed() && (failed == nil || seed < failed.Scenario.Seed) {
					failed = res
				}
				mu.Unlock()
			}
		}()
	}
	for _, seed := range list {
		mu.Lock()
		stop := failed != nil
		mu.Unlock()
		if stop || !explicit && time.Since(start) > realBudget {
			break
		}
		next <- job{seed, open(t)} // open may call t.Fatal: on this goroutine
	}
	close(next)
	wg.Wait()
	if failed != nil {
		t.Fatal(failed.Report())
	}
	el := time.Since(start)
	t.Logf("sim: %d seeds in %v: %.1f seeds/s", ran, el.Round(time.Millisecond), float64(ran)/el.Seconds())
}

func TestSimSQLite(t *testing.T) {
	dir := t.TempDir()
	runReal(t, func(t *testing.T) *sim.Backend {
		db, err := sql.Open("sqlite", filepath.Join(dir, rand.Text()+".db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1) // as the sqlstore documentation advises
		t.Cleanup(func() { db.Close() })
		return sqlBackend(t, "SQLite", db, sqlstore.SQLite)
	})
}

func TestSimPostgres(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(16)
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(t.Context()); err != nil {
		testenv.Unavailable(t, "PostgreSQL at %s: %v", dsn, err)
	}
	runReal(t, func(t *testing.T) *sim.Backend { return sqlBackend(t, "PostgreSQL", db, sqlstore.PostgreSQL) })
}

func TestSimRedis(t *testing.T) { runReal(t, redisBackend(t)) }

// redisBackend returns a maker of stores on the test Redis server, each
// under a prefix of its own.
func redisBackend(t *testing.T) func(t *testing.T) *sim.Backend {
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { client.Close() })
	if err := client.Ping(t.Context()).Err(); err != nil {
		testenv.Unavailable(t, "Redis: %v", err)
	}
	return func(t *testing.T) *sim.Backend {
		prefix := "idemgate-sim:" + rand.Text() + ":"
		// No grace: Redis deletes a record at its expiry, so that the
		// deletion seeds meet records Redis itself deleted.
		st, err := redisstore.New(t.Context(), client, &redisstore.Options{Prefix: prefix, TTL: realTiming.TTL, Grace: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx := context.Background()
			iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				client.Unlink(ctx, iter.Val())
			}
		})
		return &sim.Backend{Name: "Redis", Test: "TestSimRedis", Store: st, Timing: realTiming}
	}
}

var _ = stdlib.GetDefaultDriver // registers "pgx"

// sqlBackend is a store on a fresh table of db, with a ledger table beside
// it that the bodies write in the transaction of their CompleteTx.
func sqlBackend(t *testing.T, name string, db *sql.DB, d sqlstore.Dialect) *sim.Backend {
	table := "igsim_" + strings.ToLower(rand.Text()[:12])
	st, err := sqlstore.New(db, d, &sqlstore.Options{Table: table, TTL: realTiming.TTL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	sink := &sqlSink{st: st, table: table + "_effects", pg: d == sqlstore.PostgreSQL}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+sink.table+" (k VARCHAR(200) NOT NULL, fence BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
		db.ExecContext(ctx, "DROP TABLE IF EXISTS "+sink.table)
	})
	purge := func(ctx context.Context) error { _, err := st.PurgeExpired(ctx, 1000); return err }
	return &sim.Backend{Name: name, Test: "TestSim" + name, Store: st, Timing: realTiming, Tx: sink, Purge: purge}
}

// sqlSink is the transactional sink: one business row per effect, written
// in the transaction that completes the claim with CompleteTx, called
// first as the sqlstore documentation advises.
type sqlSink struct {
	st    *sqlstore.Store
	table string
	pg    bool
}

func (s *sqlSink) ph(n int) string {
	if s.pg {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func (s *sqlSink) Commit(ctx context.Context, c store.Claim) error {
	var opts *sql.TxOptions
	if a := sim.AttemptFrom(ctx); a != nil && a.RepeatableRead && s.pg {
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
	}
	tx, err := s.st.DB().BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.st.CompleteTx(ctx, tx, c); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+s.table+" (k, fence) VALUES ("+s.ph(1)+", "+s.ph(2)+")", c.Key, c.Fence); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sqlSink) Effects(ctx context.Context, key string, fence int64) (int, error) {
	var n int
	q := "SELECT COUNT(*) FROM " + s.table + " WHERE k = " + s.ph(1) + " AND (" + s.ph(2) + " OR fence = " + s.ph(3) + ")"
	err := s.st.DB().QueryRowContext(ctx, q, key, fence == 0, fence).Scan(&n)
	return n, err
}
