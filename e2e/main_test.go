package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/idemgate/idemgate/internal/testenv"
)

// exampleRun is the path of the example-run binary built by TestMain, and
// buildErr why it could not be built. Both are written before any test runs.
var (
	exampleRun string
	buildErr   error
)

func TestMain(m *testing.M) {
	exampleRun, buildErr = testenv.GoBuild("github.com/idemgate/idemgate/cmd/example-run")
	if buildErr != nil {
		fmt.Fprintln(os.Stderr, "e2e:", buildErr)
	}
	testenv.Main(m)
}

// binary returns the example-run executable, failing t if it did not build.
func binary(t testing.TB) string {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("building example-run: %v", buildErr)
	}
	return exampleRun
}
