package sim_test

import (
	"flag"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/internal/sim"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store/memstore"
)

var burstRefusalsFlag = flag.Bool("sim.burst-refusals", false, "the pipeline family draws the slow burst beside refusals too (sim.BurstBesideRefusals)")

func TestMain(m *testing.M) {
	flag.Parse()
	sim.BurstBesideRefusals = *burstRefusalsFlag
	testenv.Main(m)
}

var (
	seedFlag  = flag.Uint64("sim.seed", 0, "run only this seed (replays a failure)")
	seedsFlag = flag.Int("sim.seeds", 0, "how many seeds to run (default: the make test budget)")
	firstFlag = flag.Uint64("sim.first", 1, "the first seed of a run of -sim.seeds")
)

// defaultSeeds is the memstore budget of go test: a few seconds with the
// race detector on a small machine.
const defaultSeeds = 300

// memTiming is the fake clock's scale: leases of seconds cost nothing.
var memTiming = sim.Timing{Lease: 2 * time.Second, TTL: 10 * time.Minute}

// seeds returns the seeds to run: the one of -sim.seed, or n from
// -sim.first.
func seeds(n int) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	if *seedsFlag > 0 {
		n = *seedsFlag
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = *firstFlag + uint64(i)
	}
	return out
}

// runMem runs one seed on a memstore under fake time.
func runMem(t *testing.T, seed uint64) *sim.Result {
	var res *sim.Result
	synctest.Test(t, func(t *testing.T) {
		st, err := memstore.New(&memstore.Options{TTL: memTiming.TTL})
		if err != nil {
			t.Fatal(err)
		}
		res = sim.Run(sim.NewScenario(seed, false), &sim.Backend{Name: "memstore", Test: "TestSim$", Store: st, Timing: memTiming, Fake: true})
	})
	return res
}

// TestSim runs the simulation on memstore under fake time, one seed after
// another, and stops at the first that breaks a rule.
func TestSim(t *testing.T) {
	start := time.Now()
	ran := 0
	for i, seed := range seeds(defaultSeeds) {
		res := runMem(t, seed)
		ran++
		if res.Failed() {
			t.Logf("sim: found a violation at seed %d, the %d-th seed run (rules: %s)", seed, i+1, strings.Join(res.Rules(), ", "))
			t.Fatal(res.Report())
		}
	}
	el := time.Since(start)
	t.Logf("sim: %d seeds on memstore in %v: %.0f seeds/s", ran, el.Round(time.Millisecond), float64(ran)/el.Seconds())
}

var surveyFlag = flag.Bool("sim.survey", false, "TestSimSurvey: run every seed and count the rules broken, instead of stopping at the first")

// TestSimSurvey runs the seeds without stopping and reports, for each rule
// broken, how many seeds broke it and the first that did: the way to see
// everything a change of the library or of the generator makes the
// simulator find. It runs only with -sim.survey.
func TestSimSurvey(t *testing.T) {
	if !*surveyFlag {
		t.Skip("run with -sim.survey")
	}
	count := map[string]int{}
	first := map[string]*sim.Result{}
	for _, seed := range seeds(defaultSeeds) {
		res := runMem(t, seed)
		seen := map[string]bool{}
		for _, v := range res.Violations {
			if !seen[v.Rule] {
				seen[v.Rule] = true
				count[v.Rule]++
				if first[v.Rule] == nil {
					first[v.Rule] = res
				}
			}
		}
	}
	for rule, n := range count {
		t.Logf("rule %s broken by %d seeds, first seed %d", rule, n, first[rule].Scenario.Seed)
	}
	if *verboseFlag {
		for _, res := range first {
			t.Log(res.Report())
		}
	}
}

var verboseFlag = flag.Bool("sim.reports", false, "TestSimSurvey: print the report of the first seed of each rule")

// TestSimReplays holds the simulator to its promise that a seed replays:
// a seed that breaks a rule breaks one again. (Not always the same rules:
// goroutines ready at the same fake instant run in any order, which can
// change which copy of a message meets which record. Everything the seed
// draws is the same, the renewals' jitter included.)
func TestSimReplays(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		a, b := runMem(t, seed), runMem(t, seed)
		if a.Failed() != b.Failed() {
			t.Errorf("seed %d broke [%s], then [%s]", seed, strings.Join(a.Rules(), " "), strings.Join(b.Rules(), " "))
		}
	}
}
