// Package testenv gives tests the real servers they need.
//
// For each backend the lookup order is: the environment variable (REDIS_ADDR,
// POSTGRES_DSN, …) if set; else a server already listening on the standard
// local port; else one started here from the installed binary on a free port
// in a temporary directory; else the test is skipped with a message naming
// what to install. With IDEMGATE_REQUIRE_BACKENDS=1 (set by .ci/run) a
// missing backend fails the test instead of skipping it.
//
// Servers started here are shared by the tests of one test binary and
// stopped by [Main], which packages call from TestMain.
package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Required reports whether missing backends must fail tests
// (IDEMGATE_REQUIRE_BACKENDS=1).
func Required() bool {
	v := os.Getenv("IDEMGATE_REQUIRE_BACKENDS")
	return v != "" && v != "0" && v != "false"
}

// Unavailable skips t, or fails it when backends are required.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("backend required (IDEMGATE_REQUIRE_BACKENDS=1) but unavailable: %s", msg)
	}
	t.Skipf("backend unavailable: %s", msg)
}

// Main runs the tests and then stops every server this package started.
// Call it from TestMain: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	StopAll()
	os.Exit(code)
}

// started holds the servers this process started, keyed by name, so that
// each is started once per test binary.
var started = struct {
	sync.Mutex
	servers map[string]*Server
}{servers: map[string]*Server{}}

// Server is a child process this package started.
type Server struct {
	Addr string // host:port it listens on
	Dir  string // its private directory
	err  error
	cmd  *exec.Cmd
	done chan struct{}
}

// Private starts a server with start in a new temporary directory for t
// alone and stops it when t ends. start is one of the Start functions of
// this package.
func Private(t testing.TB, what string, start func(dir string) (*Server, error)) *Server {
	t.Helper()
	dir := t.TempDir()
	s, err := start(dir)
	if err != nil {
		Unavailable(t, "%s: %v", what, err)
	}
	s.Dir = dir
	t.Cleanup(s.Stop)
	return s
}

// shared returns the server called name, starting it with start on first
// use. A failed start is remembered, so it is tried once per binary.
func shared(name string, start func(dir string) (*Server, error)) (*Server, error) {
	started.Lock()
	defer started.Unlock()
	if s, ok := started.servers[name]; ok {
		return s, s.err
	}
	dir, err := os.MkdirTemp("", "idemgate-"+name+"-")
	if err != nil {
		return nil, err
	}
	s, err := start(dir)
	if err != nil {
		os.RemoveAll(dir)
		s = &Server{err: err}
	} else {
		s.Dir = dir
	}
	started.servers[name] = s
	return s, s.err
}

// StopAll stops every server this package started. Main calls it; a
// TestMain that cannot use Main (e.g. goleak's VerifyTestMain) calls it
// itself before exiting.
func StopAll() {
	started.Lock()
	defer started.Unlock()
	for name, s := range started.servers {
		s.Stop()
		delete(started.servers, name)
	}
}

// Stop kills the server's whole process group, waits for it and removes
// its directory. It is safe to call more than once.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		defer func() { s.cmd = nil }()
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	}
	if s.Dir != "" {
		os.RemoveAll(s.Dir)
	}
}

// Start runs name with args in its own process group, logging to a file in
// dir, and waits until addr accepts connections or the process exits.
func Start(dir, addr string, readyWithin time.Duration, name string, args ...string) (*exec.Cmd, chan struct{}, error) {
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	deadline := time.Now().Add(readyWithin)
	for {
		if Listening(addr) {
			return cmd, done, nil
		}
		select {
		case <-done:
			out, _ := os.ReadFile(logf.Name())
			return nil, nil, fmt.Errorf("%s exited before listening on %s: %s", name, addr, tail(out))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return nil, nil, fmt.Errorf("%s not listening on %s after %v", name, addr, readyWithin)
		}
	}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Listening reports whether something accepts TCP connections at addr.
func Listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// AwaitListening returns once addr accepts TCP connections. It fails when
// exited delivers first (the process or goroutine that should listen has
// ended, with that error) or after within. It polls: servers that report no
// readiness leave nothing else to wait on.
func AwaitListening(addr string, within time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(within)
	for !Listening(addr) {
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v", addr, within)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before listening on %s: %v", addr, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startOnFreePort starts a server with args built for a free port. It
// retries a couple of times in case another process took the port meanwhile.
func startOnFreePort(dir string, readyWithin time.Duration, name string, args func(port int) []string) (*Server, error) {
	var last error
	for range 3 {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd, done, err := Start(dir, addr, readyWithin, name, args(port)...)
		if err == nil {
			return &Server{Addr: addr, cmd: cmd, done: done}, nil
		}
		last = err
	}
	return nil, last
}

// lookPath finds an installed binary in PATH or in the given places.
func lookPath(name string, places ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, p := range places {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH or %v", name, places)
}

// Context returns a context for setup work that outlives no test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func itoa(i int) string { return strconv.Itoa(i) }
