package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestGoBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	const pkg = "github.com/idemgate/idemgate/cmd/example-run"
	bin, err := GoBuild(pkg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forget(goBuildName(pkg)) }) // this package has no TestMain to do it
	if again, err := GoBuild(pkg); err != nil || again != bin {
		t.Errorf("second GoBuild = %q, %v; want the first build, %q", again, err, bin)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("GoBuild returned %q, which does not exist: %v", bin, err)
	}
	// A bad setting makes example-run exit at once with a message, which
	// proves the file is the program without serving anything.
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "IDEMGATE_LEASE=never")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "IDEMGATE_LEASE") {
		t.Errorf("example-run with IDEMGATE_LEASE=never: err %v, output %q; want an exit naming IDEMGATE_LEASE", err, out)
	}

	if _, err := GoBuild("github.com/idemgate/idemgate/no/such/command"); err == nil {
		t.Error("GoBuild of a missing package succeeded; want an error")
	}
}

// forget stops the shared server called name and forgets it.
func forget(name string) {
	started.Lock()
	s := started.servers[name]
	delete(started.servers, name)
	started.Unlock()
	if s != nil {
		s.Stop()
	}
}
