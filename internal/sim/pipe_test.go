package sim_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/outboxmodel"
	"github.com/idemgate/idemgate/internal/sim"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// The pipeline family runs in real time (pstest is a gRPC server): short
// leases, a few seeds at once, a fixed count of seeds per backend (the
// first ones: a failing seed is one of them on every machine, however
// slow).

// pipeLease is the relays' lease: the unit of a pipeline run.
const pipeLease = 400 * time.Millisecond

// pipeSeeds is the model outbox's seed count that the plant proof doubles;
// go test runs fewer beside the other packages (pipeModelSeeds), and the
// stores' outboxes fewer still (pipeSQLSeeds, pipeGoogleSeeds): the family
// runs in real time, and a loaded host makes its timing rules trip.
const (
	pipeSeeds       = 40
	pipeModelSeeds  = 24
	pipeSQLSeeds    = 6
	pipeGoogleSeeds = 4
)

// pipeParallel is how many seeds run at once.
const pipeParallel = 6

// modelBackend is the model outbox over a memstore.
func modelBackend() *sim.PipeBackend {
	m := outboxmodel.New(time.Hour)
	return &sim.PipeBackend{Name: "model outbox", Test: "TestSimPipeline$", Store: m.Store(), Complete: m.CompleteTx, Source: m, Lease: pipeLease, Burst: true}
}

// runPipe runs n pipeline seeds (or those of -sim.seeds / -sim.seed) on
// backends made by open, pipeParallel at a time, until one fails; it
// returns the failure of the lowest seed that failed, and how
// many seeds ran. With -sim.survey it runs every seed and logs, for each
// rule broken, how many seeds broke it and the lowest (and, with
// -sim.reports, that seed's report).
func runPipe(t *testing.T, n int, open func(t *testing.T) *sim.PipeBackend) (*sim.Result, int) {
	return runPipeFor(t, n, open, (*sim.Result).Failed)
}

// runPipeFor is runPipe, looking for a seed whose result found says is
// the one.
func runPipeFor(t *testing.T, n int, open func(t *testing.T) *sim.PipeBackend, found func(*sim.Result) bool) (*sim.Result, int) {
	start := time.Now()
	var (
		mu     sync.Mutex
		failed *sim.Result
		ran    int
		wg     sync.WaitGroup
		broke  = map[string][]uint64{}
		first  = map[string]*sim.Result{}
	)
	type job struct {
		seed uint64
		b    *sim.PipeBackend
	}
	next := make(chan job)
	for range pipeParallel {
		wg.Go(func() {
			for j := range next {
				res := sim.RunPipeline(sim.NewPipeScenario(j.seed), j.b)
				mu.Lock()
				ran++
				for _, r := range res.Rules() {
					broke[r] = append(broke[r], j.seed)
					if first[r] == nil || j.seed < first[r].Scenario.Seed {
						first[r] = res
					}
				}
				if found(res) && (failed == nil || j.seed < failed.Scenario.Seed) {
					failed = res
				}
				mu.Unlock()
			}
		})
	}
	for _, seed := range seeds(n) {
		mu.Lock()
		stop := failed != nil && !*surveyFlag
		mu.Unlock()
		if stop {
			break
		}
		next <- job{seed, open(t)}
	}
	close(next)
	wg.Wait()
	for _, r := range slices.Sorted(maps.Keys(broke)) {
		t.Logf("rule %s broken by %d seeds, lowest %d", r, len(broke[r]), slices.Min(broke[r]))
		if *verboseFlag {
			t.Log(first[r].Report())
		}
	}
	el := time.Since(start)
	t.Logf("sim pipeline: %d seeds in %v: %.2f seeds/s", ran, el.Round(time.Millisecond), float64(ran)/el.Seconds())
	return failed, ran
}

// TestSimPipeline runs the pipeline family on the model outbox.
func TestSimPipeline(t *testing.T) {
	if failed, _ := runPipe(t, pipeModelSeeds, func(*testing.T) *sim.PipeBackend { return modelBackend() }); failed != nil {
		t.Logf("sim: found a violation at seed %d (rules: %v)", failed.Scenario.Seed, failed.Rules())
		t.Fatal(failed.Report())
	}
}

// TestSimPipelineSQLite runs the pipeline family on SQLite's outbox.
func TestSimPipelineSQLite(t *testing.T) {
	dir := t.TempDir()
	if failed, _ := runPipe(t, pipeSQLSeeds, func(t *testing.T) *sim.PipeBackend {
		db, err := sql.Open("sqlite", filepath.Join(dir, rand.Text()+".db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return sqlPipeBackend(t, "SQLite", db, sqlstore.SQLite)
	}); failed != nil {
		t.Fatal(failed.Report())
	}
}

// TestSimPipelinePostgres runs the pipeline family on PostgreSQL's outbox.
func TestSimPipelinePostgres(t *testing.T) {
	db := postgresPool(t)
	if failed, _ := runPipe(t, pipeSQLSeeds, func(t *testing.T) *sim.PipeBackend {
		return sqlPipeBackend(t, "PostgreSQL", db, sqlstore.PostgreSQL)
	}); failed != nil {
		t.Fatal(failed.Report())
	}
}

// pgPool is the test binary's pool of PostgreSQL connections, shared by
// its pipeline runs so that their seeds do not open a pool each.
var pgPool struct {
	sync.Mutex
	db *sql.DB
}

// postgresPool returns the shared pool, opening it on first use; it lives
// as long as the test binary.
func postgresPool(t *testing.T) *sql.DB {
	pgPool.Lock()
	defer pgPool.Unlock()
	if pgPool.db != nil {
		return pgPool.db
	}
	dsn := testenv.PostgresDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(16)
	if err := db.PingContext(t.Context()); err != nil {
		db.Close()
		testenv.Unavailable(t, "PostgreSQL at %s: %v", dsn, err)
	}
	pgPool.db = db
	return db
}

// sqlPipeBackend is a SQL store with its outbox on fresh tables of db.
func sqlPipeBackend(t *testing.T, name string, db *sql.DB, d sqlstore.Dialect) *sim.PipeBackend {
	table := "igpipe_" + rand.Text()[:12]
	st, err := sqlstore.New(db, d, &sqlstore.Options{Table: table, TTL: time.Hour, Outbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table+"_outbox")
		db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
	})
	complete := func(ctx context.Context, c store.Claim, msgs []outbox.Message, commit bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := st.CompleteTx(ctx, tx, c, msgs...); err != nil {
			return err
		}
		if !commit {
			return tx.Rollback()
		}
		return tx.Commit()
	}
	return &sim.PipeBackend{Name: name, Test: "TestSimPipeline" + strings.Replace(name, "PostgreSQL", "Postgres", 1) + "$", Store: st, Complete: complete, Source: st.Outbox(), Lease: pipeLease,
		// One connection (SQLite), shared by every stage A transaction and
		// Take, under -race: seconds of queueing, no starvation.
		DelayBound: 15}
}
