package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
	"go.uber.org/goleak"
)

// The program under test is this test binary itself, run as a child
// process with childEnv set: TestMain then calls main, which registers
// OnOrder and blocks in funcframework.Start. A child process, because the
// framework has a process-wide registry, serves on a port it opens itself
// and never stops.
const childEnv = "IDEMGATE_EXAMPLE_FUNCTION_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// client is the tests' HTTP client; each test closes its idle connections.
var client = &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}

// supplier counts the requests per Idempotency-Key; fail makes the first
// request of each key fail.
type supplier struct {
	fail bool

	mu     sync.Mutex // guards hits and bodies
	hits   map[string]int
	bodies map[string]string
}

func (s *supplier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.hits[key]++
	n := s.hits[key]
	s.bodies[key] = string(b)
	s.mu.Unlock()
	if s.fail && n == 1 {
		http.Error(w, "warehouse offline", http.StatusBadGateway)
	}
}

func (s *supplier) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[key]
}

func (s *supplier) body(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[key]
}

func newSupplier(t *testing.T, fail bool) (*supplier, string) {
	s := &supplier{fail: fail, hits: map[string]int{}, bodies: map[string]string{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// lockedBuffer collects the child's output.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startFunction runs example-function with env on a free port and returns
// its base URL. The variables it reads are cleared first, so that the
// developer's shell does not leak in.
func startFunction(t *testing.T, env ...string) string {
	t.Helper()
	var base []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "FUNCTION_TARGET", "PORT", "IDEMGATE_STORE", "SUPPLIER_URL", "IDEMGATE_LEASE", "LOG_LEVEL", "IDEMGATE_DISABLED":
			continue
		}
		base = append(base, kv)
	}
	var lastErr error
	for range 3 { // the port is free when picked, not necessarily when the child binds it
		addr := freeAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(base, childEnv+"=1", "PORT="+port), env...)
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		if err := testenv.AwaitListening(addr, 20*time.Second, exited); err != nil {
			stop()
			lastErr = fmt.Errorf("%w; output:\n%s", err, out)
			continue
		}
		t.Cleanup(func() {
			client.CloseIdleConnections()
			stop()
			if t.Failed() {
				t.Logf("example-function output:\n%s", out)
			}
		})
		return "http://" + addr
	}
	t.Fatalf("example-function did not start: %v", lastErr)
	return ""
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

const source = "//pubsub.googleapis.com/projects/acme/topics/orders"

func published(id, data string) []byte {
	b, _ := json.Marshal(map[string]any{
		"message": map[string]any{
			"messageId":   id,
			"message_id":  id, // as Pub/Sub writes push bodies
			"data":        base64.StdEncoding.EncodeToString([]byte(data)),
			"publishTime": "2026-03-01T10:15:00Z",
			"attributes":  map[string]string{"order_id": "o-" + id},
		},
		"subscription": "projects/acme/subscriptions/eventarc-us-central1-onorder-sub-1",
	})
	return b
}

// eventarc is a binary-mode CloudEvent as Eventarc sends it.
func eventarc(url, id, data string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(published(id, data)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Ce-Id", id)
	r.Header.Set("Ce-Specversion", "1.0")
	r.Header.Set("Ce-Type", "google.cloud.pubsub.topic.v1.messagePublished")
	r.Header.Set("Ce-Source", source)
	return r
}

// push is a plain Pub/Sub push to an endpoint path that names the topic.
func push(url, id, data string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, url+"/projects/acme/topics/orders", bytes.NewReader(published(id, data)))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func post(t *testing.T, r *http.Request) int {
	t.Helper()
	resp, err := client.Do(r.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func TestOnOrderReachesTheSupplierOnce(t *testing.T) {
	sup, supURL := newSupplier(t, false)
	url := startFunction(t, "SUPPLIER_URL="+supURL, "IDEMGATE_STORE=memory://", "LOG_LEVEL=debug")

	if code := post(t, eventarc(url, "1001", `{"sku":"A-1"}`)); code != 200 {
		t.Fatalf("Eventarc event = %d, want 200", code)
	}
	if code := post(t, eventarc(url, "1001", `{"sku":"A-1"}`)); code != 200 {
		t.Fatalf("its redelivery = %d, want 200 (ack)", code)
	}
	if n := sup.count("msg:1001"); n != 1 {
		t.Fatalf("the supplier got msg:1001 %d times, want once", n)
	}
	if got := sup.body("msg:1001"); got != `{"sku":"A-1"}` {
		t.Errorf("the supplier got body %q, want the message data", got)
	}

	// The same message through a legacy push and again through Eventarc:
	// one key, msg:<messageId>, whatever the path.
	if code := post(t, push(url, "1002", "{}")); code != 200 {
		t.Fatalf("legacy push = %d, want 200", code)
	}
	if code := post(t, eventarc(url, "1002", "{}")); code != 200 {
		t.Fatalf("the same message by Eventarc = %d, want 200", code)
	}
	if n := sup.count("msg:1002"); n != 1 {
		t.Fatalf("the supplier got msg:1002 %d times, want once", n)
	}
}

func TestOnOrderSupplierFailureIsRetried(t *testing.T) {
	sup, supURL := newSupplier(t, true)
	// FUNCTION_TARGET as the platform sets it from --entry-point.
	url := startFunction(t, "SUPPLIER_URL="+supURL, "FUNCTION_TARGET=OnOrder")
	if code := post(t, eventarc(url, "2001", "{}")); code != 500 {
		t.Fatalf("supplier failure = %d, want 500 (nack)", code)
	}
	if code := post(t, eventarc(url, "2001", "{}")); code != 200 {
		t.Fatalf("the retry = %d, want 200", code)
	}
	if code := post(t, eventarc(url, "2001", "{}")); code != 200 {
		t.Fatalf("a redelivery after success = %d, want 200", code)
	}
	if n := sup.count("msg:2001"); n != 2 {
		t.Fatalf("the supplier got msg:2001 %d times, want 2 (failed, then done once)", n)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	// run fails before registering anything, so this runs in-process.
	for env, want := range map[string]string{
		"IDEMGATE_STORE=nosuch://x": "nosuch",
		"IDEMGATE_LEASE=soon":       "IDEMGATE_LEASE",
		"LOG_LEVEL=loud":            "LOG_LEVEL",
	} {
		k, v, _ := strings.Cut(env, "=")
		err := run(context.Background(), func(s string) string {
			if s == k {
				return v
			}
			return ""
		}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: run = %v, want an error naming %q", env, err, want)
		}
	}
}

// A start-up failure is a JSON line in the function's log format.
func TestRunMainLogsFailureAsJSON(t *testing.T) {
	var out lockedBuffer
	code := runMain(context.Background(), func(k string) string {
		if k == "IDEMGATE_STORE" {
			return "nosuch://x"
		}
		return ""
	}, &out)
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &line); err != nil {
		t.Fatalf("not one JSON line: %q (%v)", out.String(), err)
	}
	if code != 1 || line["severity"] != "ERROR" || line["message"] != "example-function failed" || !strings.Contains(line["error"].(string), "nosuch") {
		t.Errorf("exit %d, line %v; want 1 and an ERROR line naming the store", code, line)
	}
}
