package testenv

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// checkEmulator starts a private emulator with start, checks that it
// passes its health check, stops it, and checks that no process of its
// group survives (a stray JVM would outlive the tests).
func checkEmulator(t *testing.T, what string, start func(dir string) (*Server, error)) {
	t.Helper()
	if testing.Short() {
		t.Skipf("starts the %s (a JVM)", what)
	}
	s := Private(t, what, start)
	if err := waitHealthy(s.Addr, 5*time.Second); err != nil {
		t.Fatalf("%s started but is not healthy: %v", what, err)
	}
	pgid := s.cmd.Process.Pid
	s.Stop()
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("after Stop, signalling process group %d = %v; want ESRCH (no process left)", pgid, err)
	}
	if Listening(s.Addr) {
		t.Fatalf("%s still listening on %s after Stop", what, s.Addr)
	}
}

func TestEmulatorHostStripsScheme(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8081":         "127.0.0.1:8081",
		"http://localhost:8081":  "localhost:8081",
		"https://localhost:8081": "localhost:8081",
	} {
		t.Setenv("IDEMGATE_TEST_EMULATOR_HOST", in)
		if got := emulatorHost("IDEMGATE_TEST_EMULATOR_HOST"); got != want {
			t.Errorf("emulatorHost with %q = %q, want %q", in, got, want)
		}
	}
}

func TestSDKFileNamesWhereItLooked(t *testing.T) {
	_, err := sdkFile("platform/no-such-emulator/none.jar")
	if err == nil {
		t.Fatal("sdkFile found a file that does not exist")
	}
	t.Log(err)
}
