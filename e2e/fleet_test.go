package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
)

// fleetConfig configures the example-run processes of a fleet.
type fleetConfig struct {
	Store    string   // IDEMGATE_STORE
	Env      []string // further environment, such as DATASTORE_EMULATOR_HOST
	Lease    string   // IDEMGATE_LEASE; empty for the gateway's default
	Supplier *supplier
}

// fleet is a set of example-run processes sharing one store, like the
// instances of one Cloud Run service. The test kills and restarts them;
// when the test ends every process is stopped and waited for.
type fleet struct {
	t     testing.TB
	insts []*instance

	mu       sync.Mutex     // guards stopping, and orders restarts.Add before restarts.Wait
	stopping bool           // set when the test ends: no more crashes or restarts
	restarts sync.WaitGroup // restarts scheduled by crash
}

// newFleet starts n processes and waits until each serves /healthz.
func newFleet(t testing.TB, n int, cfg fleetConfig) *fleet {
	t.Helper()
	bin := binary(t)
	env := append(os.Environ(),
		"IDEMGATE_STORE="+cfg.Store,
		"IDEMGATE_LEASE="+cfg.Lease,
		"LOG_LEVEL=warn",
		"IDEMGATE_METRICS=",
		"IDEMGATE_DISABLED=",
	)
	env = append(env, cfg.Env...)
	f := &fleet{t: t}
	dir := t.TempDir()
	for i := range n {
		name := string(rune('a' + i))
		f.insts = append(f.insts, &instance{
			name:     name,
			bin:      bin,
			env:      env,
			supplier: cfg.Supplier.URL,
			logPath:  filepath.Join(dir, name+".log"),
			killed:   map[int]bool{},
		})
	}
	t.Cleanup(f.shutdown)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, in := range f.insts {
		wg.Go(func() { errs[i] = in.start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// shutdown stops every process (SIGTERM, then SIGKILL if it does not
// drain in time) and shows their logs if the test failed.
func (f *fleet) shutdown() {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
	f.restarts.Wait()
	var wg sync.WaitGroup
	for _, in := range f.insts {
		wg.Go(in.stop)
	}
	wg.Wait()
	if f.t.Failed() {
		for _, in := range f.insts {
			b, _ := os.ReadFile(in.logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			f.t.Logf("log of example-run %s (end):\n%s", in.name, b)
		}
	}
}

// pick returns the URL of a random process that is up, "" if none is.
func (f *fleet) pick() string {
	var up []string
	for _, in := range f.insts {
		if u := in.url(); u != "" {
			up = append(up, u)
		}
	}
	if len(up) == 0 {
		return ""
	}
	return up[rand.IntN(len(up))]
}

// instance returns the process called name.
func (f *fleet) instance(name string) *instance {
	for _, in := range f.insts {
		if in.name == name {
			return in
		}
	}
	return nil
}

// anyLife makes crash kill whichever life of an instance is running.
const anyLife = -1

// crash SIGKILLs the given life of in (or any, with anyLife), and starts in
// again after downFor, in the background. It reports whether it killed
// anything: in may be down, or already in another life.
func (f *fleet) crash(in *instance, life int, downFor time.Duration) bool {
	f.mu.Lock()
	if f.stopping {
		f.mu.Unlock()
		return false
	}
	f.restarts.Add(1)
	f.mu.Unlock()
	if !in.kill(life) {
		f.restarts.Done()
		return false
	}
	go func() {
		defer f.restarts.Done()
		pause(f.t.Context(), downFor)
		if err := in.start(); err != nil {
			f.t.Errorf("restarting example-run %s: %v", in.name, err)
		}
	}()
	return true
}

// crashCaller crashes the life that sent a supplier request (caller is
// "name/life", as the supplier records it), if it is still running.
func (f *fleet) crashCaller(caller string, downFor time.Duration) bool {
	name, life, _ := strings.Cut(caller, "/")
	in := f.instance(name)
	return in != nil && f.crash(in, atoi(life), downFor)
}

// killedLife reports whether the life caller ("name/life", as the supplier
// records it) was ended by SIGKILL.
func (f *fleet) killedLife(caller string) bool {
	name, life, ok := strings.Cut(caller, "/")
	in := f.instance(name)
	if !ok || in == nil {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.killed[atoi(life)]
}

// lostClaim reports whether the life caller ("name/life") logged that it
// lost its claim on key while the work ran: its lease lapsed unrenewed,
// and the gateway cancelled the work.
func (f *fleet) lostClaim(caller, key string) bool {
	name, life, _ := strings.Cut(caller, "/")
	in := f.instance(name)
	if in == nil {
		return false
	}
	b, err := os.ReadFile(in.logPath)
	if err != nil {
		return false
	}
	_, b, _ = bytes.Cut(b, []byte(lifeBanner(atoi(life), "")))
	b, _, _ = bytes.Cut(b, []byte("=== life "))
	for line := range bytes.Lines(b) {
		if bytes.Contains(line, []byte("claim lost")) && bytes.Contains(line, []byte(`"`+key+`"`)) {
			return true
		}
	}
	return false
}

// lifeBanner is the line an instance's log gets when a life begins; with
// an empty port, its prefix.
func lifeBanner(life int, port string) string {
	if port == "" {
		return fmt.Sprintf("=== life %d on port ", life)
	}
	return fmt.Sprintf("=== life %d on port %s\n", life, port)
}

// kills returns how many SIGKILLs the fleet's processes received.
func (f *fleet) kills() int {
	n := 0
	for _, in := range f.insts {
		in.mu.Lock()
		n += len(in.killed)
		in.mu.Unlock()
	}
	return n
}

// instance is one example-run process, which may be started again after it
// exits, on the same port. Each start begins a new life, numbered from 0;
// a life calls the supplier at /i/<name>/<life>, so the supplier knows who
// sent each request.
type instance struct {
	name     string
	bin      string
	env      []string
	supplier string // the supplier's base URL
	logPath  string

	life sync.Mutex // held while the process is started, killed or stopped

	mu     sync.Mutex    // guards the fields below
	port   int           // 0 until the first start
	lives  int           // how many times it was started
	cmd    *exec.Cmd     // the running process; nil when down
	done   chan struct{} // closed when cmd has exited
	up     bool          // serving /healthz and not being stopped
	killed map[int]bool  // the lives that ended by SIGKILL
}

// url returns the process's base URL while it is up, else "".
func (in *instance) url() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.up {
		return ""
	}
	return "http://127.0.0.1:" + itoa(in.port)
}

// start starts a new life and waits until it serves /healthz. It keeps the
// port of the previous life, unless another program took it meanwhile.
func (in *instance) start() error {
	in.life.Lock()
	defer in.life.Unlock()
	var err error
	for range 3 {
		if err = in.spawn(); err == nil {
			return nil
		}
		in.mu.Lock()
		in.port = 0 // pick another port next time
		in.mu.Unlock()
	}
	return err
}

func (in *instance) spawn() error {
	in.mu.Lock()
	if in.port == 0 {
		p, err := testenv.FreePort()
		if err != nil {
			in.mu.Unlock()
			return err
		}
		in.port = p
	}
	port, life := in.port, in.lives
	in.lives++
	in.mu.Unlock()

	logf, err := os.OpenFile(in.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	io.WriteString(logf, lifeBanner(life, itoa(port)))
	cmd := exec.Command(in.bin)
	cmd.Env = append(slices.Clip(in.env), "PORT="+itoa(port), fmt.Sprintf("SUPPLIER_URL=%s/i/%s/%d", in.supplier, in.name, life))
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test binary dies, so do its children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	if err := waitServing("http://127.0.0.1:"+itoa(port), done); err != nil {
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("example-run %s life %d: %w (log: %s)", in.name, life, err, in.logPath)
	}
	in.mu.Lock()
	in.cmd, in.done, in.up = cmd, done, true
	in.mu.Unlock()
	return nil
}

// waitServing polls base/healthz until it answers 200, the process exits
// (done is closed) or 30 s have passed.
func waitServing(base string, done <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := client.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("exited before serving %s", base)
		case <-time.After(pollEvery):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving %s/healthz after 30s", base)
		}
	}
}

// kill SIGKILLs the process and waits for it to exit: a crash, in the
// middle of whatever it was doing. It reports false if no process was
// running, or if only (unless anyLife) is not the running life.
func (in *instance) kill(only int) bool {
	in.life.Lock()
	defer in.life.Unlock()
	in.mu.Lock()
	cmd, done, life := in.cmd, in.done, in.lives-1
	if cmd == nil || only != anyLife && only != life {
		in.mu.Unlock()
		return false
	}
	in.up, in.cmd = false, nil
	in.killed[life] = true
	in.mu.Unlock()
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return true
}

// stop sends SIGTERM, Cloud Run's shutdown signal, and waits for the
// process to drain and exit; after 10 s it kills it.
func (in *instance) stop() {
	in.life.Lock()
	defer in.life.Unlock()
	in.mu.Lock()
	cmd, done := in.cmd, in.done
	in.up, in.cmd = false, nil
	in.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}
