//go:build idemgate_plant

package sim_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/sim"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestSimFindsPlants proves the simulator finds the bug a patch of the
// memstore family plants (see patchFromEnv) within the default budget of
// seeds, and says how many seeds it took. See scripts/sim-plants.sh.
func TestSimFindsPlants(t *testing.T) {
	pp, ok := patchFromEnv()
	if !ok || pp.backend != "memstore" {
		t.Skip("no memstore plant: see scripts/sim-plants.sh")
	}
	for i, seed := range seeds(defaultSeeds) {
		if res := runMem(t, seed); slices.ContainsFunc(res.Rules(), func(r string) bool { return slices.Contains(pp.rules, r) }) {
			t.Logf("plant %s: found at seed %d, after %d seeds (rules: %s)", pp.name, seed, i+1, strings.Join(res.Rules(), ", "))
			return
		}
	}
	t.Errorf("plant %s: not found within %d seeds (looking for %v)", pp.name, len(seeds(defaultSeeds)), pp.rules)
}

// A patchPlant is a planted bug applied as a patch (internal/sim/plants/
// NAME.patch) to a scratch copy of the library, over which
// scripts/sim-plants.sh built this binary (go test -overlay): its name,
// the rules the simulator must break with it and the backend that
// reaches it, from the patch's header lines (Rules:, Backend:), which the
// script passes in IDEMGATE_PLANT_PATCH, IDEMGATE_PLANT_RULES and
// IDEMGATE_PLANT_BACKEND.
type patchPlant struct {
	name, backend string
	rules         []string
	// rare (Rare: yes): its scenario comes up in few seeds, and not in
	// each run of them (one showed at seed 35, at seed 50, and once not
	// within 85 seeds); it gets eight times the budget, which a run that
	// finds it early never spends.
	rare bool
}

// patchFromEnv returns the patch plant of the environment, if any.
func patchFromEnv() (patchPlant, bool) {
	pp := patchPlant{name: os.Getenv("IDEMGATE_PLANT_PATCH"), backend: os.Getenv("IDEMGATE_PLANT_BACKEND"),
		rules: strings.Fields(strings.ReplaceAll(os.Getenv("IDEMGATE_PLANT_RULES"), ",", " ")),
		rare:  os.Getenv("IDEMGATE_PLANT_RARE") == "yes"}
	return pp, pp.name != "" && len(pp.rules) > 0
}

// pipeBackends are the pipeline family's backends, by the name a patch's
// Backend: line gives.
var pipeBackends = map[string]func(t *testing.T) *sim.PipeBackend{
	"model": pipeModel, "sqlite": pipeSQLite, "postgres": pipePostgres,
	"datastore": pipeDatastore, "firestore": pipeFirestore, "datastore-instep": pipeDatastoreInStep,
}

func pipeModel(*testing.T) *sim.PipeBackend { return modelBackend() }

func pipeSQLite(t *testing.T) *sim.PipeBackend {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "pipe.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return sqlPipeBackend(t, "SQLite", db, sqlstore.SQLite)
}

func pipePostgres(t *testing.T) *sim.PipeBackend {
	return sqlPipeBackend(t, "PostgreSQL", postgresPool(t), sqlstore.PostgreSQL)
}

func pipeDatastore(t *testing.T) *sim.PipeBackend {
	return datastoreBackend(t, datastoreClient(t), googleSkew)
}

func pipeFirestore(t *testing.T) *sim.PipeBackend {
	return firestoreBackend(t, firestoreClient(t), googleSkew)
}

func pipeDatastoreInStep(t *testing.T) *sim.PipeBackend {
	return datastoreBackend(t, datastoreClient(t), 0)
}

// TestSimPipelineFindsPlants proves the pipeline family finds the bug a
// patch of a pipeline backend plants (see patchFromEnv) within its seeds,
// and says at which seed. See scripts/sim-plants.sh.
func TestSimPipelineFindsPlants(t *testing.T) {
	pp, ok := patchFromEnv()
	backend := pipeBackends[pp.backend]
	if !ok || backend == nil {
		t.Skip("no pipeline plant: see scripts/sim-plants.sh")
	}
	n := 2 * pipeSeeds
	if pp.rare {
		n *= 8
	}
	// Seeds that break other rules (a defect of the library not planted)
	// are passed over: the proof is that the plant's own rules break.
	failed, seeds := runPipeFor(t, n, backend, func(res *sim.Result) bool {
		return slices.ContainsFunc(res.Rules(), func(r string) bool { return slices.Contains(pp.rules, r) })
	})
	if failed != nil {
		t.Logf("plant %s: found at seed %d, after %d seeds (rules: %s)", pp.name, failed.Scenario.Seed, seeds, strings.Join(failed.Rules(), ", "))
		return
	}
	t.Errorf("plant %s: not found within %d seeds (looking for %v)", pp.name, seeds, pp.rules)
}
