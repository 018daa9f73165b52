package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("PUSHSTORM_TEST_ENDPOINT") == "1" {
		serveTestEndpoint() // the test binary plays the spawned endpoint
		return
	}
	goleak.VerifyTestMain(m)
}

// testConfig is a small, fast storm with no chaos: tests switch on what
// they exercise. Backoffs are tiny so retries take milliseconds.
func testConfig(url string) config {
	return config{
		URL:          url,
		N:            20,
		Concurrency:  4,
		MaxAttempts:  10,
		BackoffMin:   time.Millisecond,
		BackoffMax:   4 * time.Millisecond,
		Timeout:      5 * time.Second,
		Form:         formWrapped,
		Subscription: "projects/test/subscriptions/orders",
		OrderPrefix:  "o-",
		ExpectKeys:   expectAuto,
	}
}

// received is one delivery as a test endpoint saw it.
type received struct {
	id      string
	attempt int // 0 in the unwrapped form
	orderID string
}

// target is a push endpoint that records every delivery and answers what
// its answer func says; nth counts deliveries of the same messageId from 1.
type target struct {
	t      testing.TB
	answer func(r *http.Request, d received, nth int) int

	mu    sync.Mutex
	got   []received     // guarded by mu
	count map[string]int // deliveries per messageId; guarded by mu
}

func newTarget(t testing.TB, answer func(r *http.Request, d received, nth int) int) (*target, *httptest.Server) {
	t.Helper()
	tg := &target{t: t, answer: answer, count: map[string]int{}}
	srv := httptest.NewServer(tg)
	t.Cleanup(srv.Close)
	return tg, srv
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var d received
	if id := r.Header.Get(hdrMessageID); id != "" {
		d = received{id: id, orderID: r.Header.Get("order_id")}
	} else {
		var pb pushBody
		if err := json.Unmarshal(body, &pb); err != nil {
			tg.t.Errorf("endpoint got a body that is not a wrapped push: %v: %s", err, body)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		d = received{id: pb.Message.MessageID, attempt: pb.DeliveryAttempt, orderID: pb.Message.Attributes["order_id"]}
	}
	tg.mu.Lock()
	tg.got = append(tg.got, d)
	tg.count[d.id]++
	nth := tg.count[d.id]
	tg.mu.Unlock()
	w.WriteHeader(tg.answer(r, d, nth))
}

// deliveries returns what the endpoint received, by messageId.
func (tg *target) deliveries() map[string][]received {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	out := map[string][]received{}
	for _, d := range tg.got {
		out[d.id] = append(out[d.id], d)
	}
	return out
}

func answerAlways(status int) func(*http.Request, received, int) int {
	return func(*http.Request, received, int) int { return status }
}

// runCmd runs the command with args and returns its exit status and output.
func runCmd(t testing.TB, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

var fast = []string{"-backoff-min", "1ms", "-backoff-max", "4ms"}

func TestRunSelfTestWithChaos(t *testing.T) {
	args := append([]string{"-self-test", "-n", "150", "-seed", "9", "-dup", "0.3", "-concurrent", "0.3",
		"-republish", "0.3", "-supplier-fail-first", "1", "-json"}, fast...)
	code, stdout, stderr := runCmd(t, t.Context(), args...)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var rep report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, stdout)
	}
	s := rep.Supplier
	switch {
	case !rep.OK || !rep.ExactlyOnce:
		t.Errorf("ok=%v exactly_once=%v, want both true: %v", rep.OK, rep.ExactlyOnce, rep.Problems)
	case s == nil || s.DistinctKeys != 150 || s.Accepted != 150 || s.Refused != 150:
		t.Errorf("supplier = %+v, want 150 keys, 150 accepted, 150 refused (fail-first 1)", s)
	case rep.Republishes == 0 || rep.TransportDuplicates == 0 || rep.ConcurrentCopies == 0:
		t.Errorf("republishes=%d duplicates=%d concurrent=%d, want chaos of every kind",
			rep.Republishes, rep.TransportDuplicates, rep.ConcurrentCopies)
	case rep.AckedMessages != rep.Messages:
		t.Errorf("acked %d of %d messages", rep.AckedMessages, rep.Messages)
	}
	if !strings.Contains(stderr, "supplier listening on http://127.0.0.1:") {
		t.Errorf("stderr does not tell the supplier URL:\n%s", stderr)
	}
}

func TestRunTextReport(t *testing.T) {
	_, srv := newTarget(t, answerAlways(http.StatusNoContent))
	code, stdout, _ := runCmd(t, t.Context(), "-url", srv.URL, "-n", "10", "-dup", "0", "-concurrent", "0", "-republish", "0")
	if code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s", code, stdout)
	}
	for _, want := range []string{
		`(?m)^orders +10$`, `(?m)^deliveries +10$`, `(?m)^acks +10$`, `(?m)^dead-lettered +0$`,
		`(?m)^lost +0$`, `(?m)^status codes +204=10$`, `(?m)^deliveries/s +\d+\.\d$`, `(?m)^OK$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("report does not match %s:\n%s", want, stdout)
		}
	}
}

func TestRunDeadLetterExitsNonZero(t *testing.T) {
	_, srv := newTarget(t, answerAlways(http.StatusInternalServerError))
	args := append([]string{"-url", srv.URL, "-n", "3", "-max-attempts", "2", "-dup", "0", "-concurrent", "0", "-republish", "0"}, fast...)
	code, stdout, _ := runCmd(t, t.Context(), args...)
	if code != exitFail {
		t.Fatalf("exit %d, want %d when messages are dead-lettered", code, exitFail)
	}
	line := regexp.MustCompile(`FAIL: 3 of 3 messages dead-lettered after 2 attempts: \d{16,} \(o-000001\), \d+ \(o-000002\), \d+ \(o-000003\)`)
	if !line.MatchString(stdout) {
		t.Errorf("no line naming the dead-lettered messages:\n%s", stdout)
	}
}

func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, exitOK, "Ack rule"},
		{"no url", nil, exitUsage, "-url is required"},
		{"bad probability", []string{"-url", "http://x/", "-dup", "1.5"}, exitUsage, "-dup is a probability"},
		{"bad form", []string{"-url", "http://x/", "-form", "cloudevent"}, exitUsage, "-form must be"},
		{"expect-once without supplier", []string{"-url", "http://x/", "-expect-once"}, exitUsage, "-expect-once needs -supplier"},
		{"stray argument", []string{"-url", "http://x/", "extra"}, exitUsage, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, t.Context(), tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// sniffer captures stderr and picks out the supplier URL run prints there.
type sniffer struct {
	ready chan struct{} // closed once url is known

	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
	url string       // guarded by mu
}

func newSniffer() *sniffer { return &sniffer{ready: make(chan struct{})} }

var supplierLine = regexp.MustCompile(`supplier listening on (\S+)`)

func (s *sniffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.buf.Write(p)
	if m := supplierLine.FindStringSubmatch(s.buf.String()); s.url == "" && m != nil {
		s.url = m[1]
		close(s.ready)
	}
	return n, err
}

func (s *sniffer) supplierURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

func (s *sniffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// noKeepAlive leaves no spare connection behind that could hold up the
// supplier's shutdown.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// A consumer without a guard runs the action for every delivery; the
// -expect-once check must catch it.
func TestRunExpectOnceCatchesNaiveConsumer(t *testing.T) {
	errOut := newSniffer()
	naive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, attrs, err := readPush(r)
		if err != nil {
			t.Errorf("readPush: %v", err)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), "POST", errOut.supplierURL(), nil)
		req.Header.Set("Idempotency-Key", attrs["order_id"])
		resp, err := noKeepAlive.Do(req)
		if err != nil {
			t.Errorf("supplier: %v", err)
			return
		}
		resp.Body.Close()
	}))
	defer naive.Close()

	var out bytes.Buffer
	code := run(t.Context(), []string{"-url", naive.URL + "/orders", "-supplier", "127.0.0.1:0", "-expect-once",
		"-n", "20", "-dup", "1", "-seed", "5"}, &out, errOut)
	if code != exitFail {
		t.Errorf("exit %d, want %d: every order reached the supplier twice", code, exitFail)
	}
	for _, want := range []string{
		"NOT exactly once: the supplier saw 20 distinct keys for 20 expected orders; 20 accepted more than once",
		"FAIL: keys accepted more than once: o-000001, o-000002",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunSupplierOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errOut := newSniffer()
	var out bytes.Buffer
	done := make(chan int)
	go func() { done <- run(ctx, []string{"-supplier", "127.0.0.1:0", "-json"}, &out, errOut) }()

	// Wait for the URL the way a script would: by reading stderr.
	select {
	case <-errOut.ready:
	case code := <-done:
		t.Fatalf("supplier-only run ended early with %d: %s", code, errOut)
	}
	url := errOut.supplierURL()
	for _, key := range []string{"a", "b", "a"} {
		req, _ := http.NewRequest("POST", url, nil)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
	var s supplierStats
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("stats do not parse: %v\n%s", err, out.String())
	}
	if s.Hits != 3 || s.DistinctKeys != 2 || s.KeysAcceptedMoreThanOnce != 1 {
		t.Errorf("stats = %+v, want 3 hits, 2 keys, 1 accepted twice", s)
	}
}
