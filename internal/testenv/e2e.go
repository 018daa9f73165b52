package testenv

import (
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// GoBuild builds the main package pkg (an import path of this module, such
// as github.com/idemgate/idemgate/cmd/example-run) once per test binary and
// returns the executable's path. The executable lives in a temporary
// directory that [Main] removes, so end-to-end tests can start it as a real
// child process as often as they like without rebuilding it. Call it from
// TestMain or from a test; a failed build is remembered and returned again.
func GoBuild(pkg string) (string, error) {
	name := path.Base(pkg)
	s, err := shared(goBuildName(pkg), func(dir string) (*Server, error) {
		// go test puts $GOROOT/bin first in the test binary's PATH, so this
		// is the toolchain that is running the tests.
		goTool, err := exec.LookPath("go")
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, name), pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, tail(out))
		}
		return &Server{}, nil // no process; Stop only removes dir
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(s.Dir, name), nil
}

// goBuildName is the name GoBuild shares its build of pkg under.
func goBuildName(pkg string) string {
	return "go-build-" + strings.NewReplacer("/", "-", ".", "-").Replace(pkg)
}
