package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// supplier counts the hits per Idempotency-Key and answers 200.
type supplier struct {
	mu   sync.Mutex // guards hits
	hits map[string]int
}

func (s *supplier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.Header.Get("Idempotency-Key")]++
	s.mu.Unlock()
}

func (s *supplier) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[key]
}

// start runs example-run on a real listener and returns its base URL.
func start(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	env["PORT"] = "0"
	go func() { errc <- run(ctx, func(k string) string { return env[k] }, io.Discard, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel() // what SIGTERM does
		if err := <-errc; err != nil {
			t.Errorf("graceful shutdown: %v", err)
		}
	})
	return "http://" + strings.Replace(addr, "[::]", "127.0.0.1", 1)
}

func pushBody(id string, attrs map[string]string) string {
	b, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"messageId": id, "data": base64.StdEncoding.EncodeToString([]byte(`{"order":1}`)), "attributes": attrs},
		"subscription": "projects/p/subscriptions/s",
	})
	return string(b)
}

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestExampleRunRoutes(t *testing.T) {
	sup := &supplier{hits: map[string]int{}}
	ss := httptest.NewServer(sup)
	defer ss.Close()
	base := start(t, map[string]string{"SUPPLIER_URL": ss.URL, "IDEMGATE_STORE": "memory://"})

	if code := post(t, base+"/", pushBody("1", nil)); code != 200 {
		t.Fatalf("POST / = %d, want 200", code)
	}
	if code := post(t, base+"/", pushBody("1", nil)); code != 204 {
		t.Fatalf("redelivery to / = %d, want 204", code)
	}
	if n := sup.count("msg:1"); n != 1 {
		t.Fatalf("supplier got msg:1 %d times, want 1", n)
	}

	if code := post(t, base+"/orders", pushBody("2", map[string]string{"order_id": "o-7"})); code != 200 {
		t.Fatalf("POST /orders = %d", code)
	}
	if code := post(t, base+"/orders", pushBody("3", map[string]string{"order_id": "o-7"})); code != 204 {
		t.Fatalf("republish to /orders = %d, want 204", code)
	}
	if n := sup.count("order_id:o-7"); n != 1 {
		t.Fatalf("supplier got order o-7 %d times, want 1", n)
	}

	for _, id := range []string{"4", "5"} {
		if code := post(t, base+"/po-updates", pushBody(id, map[string]string{"po_id": "po-1"})); code != 200 {
			t.Fatalf("POST /po-updates %s = %d", id, code)
		}
	}
	if code := post(t, base+"/po-updates", pushBody("4", map[string]string{"po_id": "po-1"})); code != 204 {
		t.Fatalf("redelivered PO update = %d, want 204", code)
	}
	if sup.count("po-update:4") != 1 || sup.count("po-update:5") != 1 {
		t.Fatalf("supplier hits = %v, want each PO update once", sup.hits)
	}

	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz = %v, %v", resp, err)
	}
	resp.Body.Close()
}

func TestExampleRunSupplierFailureNacks(t *testing.T) {
	var fail sync.Once
	ss := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		failed := false
		fail.Do(func() { failed = true })
		if failed {
			http.Error(w, "down", http.StatusBadGateway)
		}
	}))
	defer ss.Close()
	base := start(t, map[string]string{"SUPPLIER_URL": ss.URL})
	if code := post(t, base+"/", pushBody("1", nil)); code != 500 {
		t.Fatalf("supplier failure = %d, want 500 (nack)", code)
	}
	if code := post(t, base+"/", pushBody("1", nil)); code != 200 {
		t.Fatalf("retry = %d, want 200", code)
	}
}

func TestExampleRunBadConfig(t *testing.T) {
	for env, want := range map[string]string{
		"IDEMGATE_STORE=nosuch://x":       "nosuch",
		"IDEMGATE_LEASE=soon":             "IDEMGATE_LEASE",
		"IDEMGATE_ORDERS_FINGERPRINT=yes": "IDEMGATE_ORDERS_FINGERPRINT",
		"LOG_LEVEL=loud":                  "LOG_LEVEL",
	} {
		k, v, _ := strings.Cut(env, "=")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := run(ctx, func(s string) string {
			if s == k {
				return v
			}
			return ""
		}, io.Discard, nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: run = %v, want an error naming %q", env, err, want)
		}
	}
}

func TestExampleRunPushAuth(t *testing.T) {
	// With an audience set, pushes need a token; /healthz stays open.
	base := start(t, map[string]string{"PUSH_AUDIENCE": "https://example.run/push", "PUSH_SERVICE_ACCOUNT": "pusher@p.iam.gserviceaccount.com"})
	if code := post(t, base+"/", pushBody("1", nil)); code != http.StatusUnauthorized {
		t.Fatalf("push without a token = %d, want 401", code)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz with push auth on = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	// Only the probe is open: a forged push POSTed to /healthz (which the
	// mux routes to the push route at /) is verified like any other.
	for _, path := range []string{"/healthz", "/healthz/", "/healthz?x=1"} {
		if code := post(t, base+path, pushBody("2", nil)); code != http.StatusUnauthorized {
			t.Fatalf("POST %s without a token = %d, want 401", path, code)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = run(ctx, func(k string) string {
		return map[string]string{"PUSH_AUDIENCE": "https://x", "PORT": "0"}[k]
	}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "PUSH_") {
		t.Fatalf("an audience without a service account: run = %v, want an error naming PUSH_*", err)
	}
}

// IDEMGATE_ORDERS_FINGERPRINT turns on the payload fingerprint of /orders:
// an order_id reused for another order is refused with 409 (reject) or
// acknowledged as a duplicate (accept); the same order republished stays a
// duplicate. Without it, a reused order_id is a duplicate (the default
// contract).
func TestExampleRunOrdersFingerprint(t *testing.T) {
	other := func(id string) string {
		b, _ := json.Marshal(map[string]any{
			"message":      map[string]any{"messageId": id, "data": base64.StdEncoding.EncodeToString([]byte(`{"order":2}`)), "attributes": map[string]string{"order_id": "o-7"}},
			"subscription": "projects/p/subscriptions/s",
		})
		return string(b)
	}
	for setting, want := range map[string]int{"": 204, "reject": 409, "accept": 204} {
		t.Run("IDEMGATE_ORDERS_FINGERPRINT="+setting, func(t *testing.T) {
			sup := &supplier{hits: map[string]int{}}
			ss := httptest.NewServer(sup)
			defer ss.Close()
			base := start(t, map[string]string{"SUPPLIER_URL": ss.URL, "IDEMGATE_ORDERS_FINGERPRINT": setting})
			if code := post(t, base+"/orders", pushBody("1", map[string]string{"order_id": "o-7"})); code != 200 {
				t.Fatalf("POST /orders = %d, want 200", code)
			}
			if code := post(t, base+"/orders", pushBody("2", map[string]string{"order_id": "o-7"})); code != 204 {
				t.Fatalf("the same order republished = %d, want 204", code)
			}
			if code := post(t, base+"/orders", other("3")); code != want {
				t.Fatalf("another order under o-7 = %d, want %d", code, want)
			}
			if n := sup.count("order_id:o-7"); n != 1 {
				t.Fatalf("supplier got o-7 %d times, want 1", n)
			}
		})
	}
}
