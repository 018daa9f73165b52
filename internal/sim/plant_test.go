//go:build idemgate_plant

package sim_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// plantRules are the rules a planted bug breaks: the item it puts back
// (of "The guarantee, second pass"; 221 is item 1 of issue 22), and what
// the simulator sees.
var plantRules = map[int][]string{
	1:  {"ack-done"},                       // a conflict with a held record acked
	3:  {"ack-effect", "ack-done", "lost"}, // a body cancelled for a lost lease recorded DONE
	9:  {"repeat"},                         // Complete retried while the lease lapses: the work runs twice
	14: {"ack-fenced"},                     // a fenced-out body acked with nobody holding the key
	// Issue 22, item 1: a record made anew after its predecessor was
	// deleted (or expired) restarts at fence 1.
	221: {"fence", "zombie"},
	// Issue 22, item 6: an ordered message whose key is held is nacked,
	// and a later message of its ordering key overtakes it.
	226: {"order"},
	// Issue 22's push authentication: a request without a token reaches
	// the guarded handler.
	229: {"auth"},
}

// TestSimFindsPlants proves the simulator finds each bug planted through
// IDEMGATE_PLANT (a build with -tags idemgate_plant) within the default
// budget of seeds, and says how many seeds it took. See
// scripts/sim-plants.sh.
func TestSimFindsPlants(t *testing.T) {
	var planted []int
	for _, f := range strings.Split(os.Getenv("IDEMGATE_PLANT"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			planted = append(planted, n)
		}
	}
	if len(planted) == 0 {
		t.Skip("no plant: set IDEMGATE_PLANT (e.g. 1,3,9,14)")
	}
	for _, n := range planted {
		want := plantRules[n]
		if want == nil {
			t.Fatalf("no rule known for plant %d", n)
		}
		found := false
		for i, seed := range seeds(defaultSeeds) {
			res := runMem(t, seed)
			if slices.ContainsFunc(res.Rules(), func(r string) bool { return slices.Contains(want, r) }) {
				t.Logf("plant %d: found at seed %d, after %d seeds (rules: %s)", n, seed, i+1, strings.Join(res.Rules(), ", "))
				found = true
				break
			}
		}
		if !found {
			t.Errorf("plant %d: not found within %d seeds (looking for %v)", n, len(seeds(defaultSeeds)), want)
		}
	}
}
