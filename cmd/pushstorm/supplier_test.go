package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

func newSupplierServer(t testing.TB, s *supplier) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// post sends one action to the supplier and returns the status.
func post(t testing.TB, url, key, po string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if po != "" {
		req.Header.Set("Po-Id", po)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getStats(t testing.TB, url string) supplierStats {
	t.Helper()
	resp, err := http.Get(url + "/stats?keys=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET /stats Content-Type = %q, want application/json", ct)
	}
	var s supplierStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("GET /stats: %v", err)
	}
	return s
}

func TestSupplierCountsKeys(t *testing.T) {
	srv := newSupplierServer(t, newSupplier(0, 0))
	defer http.DefaultClient.CloseIdleConnections()
	for _, key := range []string{"a", "b", "a", "c", "a"} {
		if got := post(t, srv.URL+"/", key, ""); got != http.StatusOK {
			t.Errorf("POST key %s = %d, want 200", key, got)
		}
	}
	s := getStats(t, srv.URL)
	if s.Hits != 5 || s.Accepted != 5 || s.DistinctKeys != 3 || s.KeysHitMoreThanOnce != 1 ||
		s.KeysAcceptedMoreThanOnce != 1 || s.KeysNeverAccepted != 0 {
		t.Errorf("stats = %+v, want 5 hits/accepted, 3 keys, 1 hit and accepted more than once", s)
	}
	if !slices.Equal(s.RepeatedKeys, []string{"a"}) {
		t.Errorf("repeated keys = %v, want [a]", s.RepeatedKeys)
	}
	if got := s.Keys["a"]; got.Hits != 3 || got.Accepted != 3 {
		t.Errorf("?keys=1 shows a = %+v, want 3 hits, 3 accepted", got)
	}
}

func TestSupplierFailFirst(t *testing.T) {
	srv := newSupplierServer(t, newSupplier(2, 0))
	defer http.DefaultClient.CloseIdleConnections()
	var got []int
	for _, key := range []string{"a", "a", "b", "a", "a"} {
		got = append(got, post(t, srv.URL+"/", key, ""))
	}
	if want := []int{500, 500, 500, 200, 200}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v (the first 2 hits of each key fail)", got, want)
	}
	s := getStats(t, srv.URL)
	if s.Refused != 3 || s.Accepted != 2 || s.KeysNeverAccepted != 1 || s.KeysAcceptedMoreThanOnce != 1 {
		t.Errorf("stats = %+v, want 3 refused, 2 accepted, b never accepted, a accepted twice", s)
	}
}

func TestSupplierRejects(t *testing.T) {
	srv := newSupplierServer(t, newSupplier(0, 0))
	defer http.DefaultClient.CloseIdleConnections()
	if got := post(t, srv.URL+"/", "", ""); got != http.StatusBadRequest {
		t.Errorf("POST without Idempotency-Key = %d, want 400", got)
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET / = %d, want 405", resp.StatusCode)
	}
	if s := getStats(t, srv.URL); s.MissingKey != 1 || s.Hits != 0 {
		t.Errorf("stats = %+v, want 1 missing key and no hits", s)
	}
}

func TestSupplierInFlight(t *testing.T) {
	sup := newSupplier(0, 0)
	arrived := make(chan struct{})
	release := make(chan struct{})
	sup.work = func(context.Context) {
		arrived <- struct{}{}
		<-release
	}
	srv := newSupplierServer(t, sup)
	defer http.DefaultClient.CloseIdleConnections()

	// Same key twice, and a third key sharing the purchase order: all three
	// are held inside the supplier at once.
	var wg sync.WaitGroup
	for _, r := range []struct{ key, po string }{{"k", "po-1"}, {"k", "po-1"}, {"other", "po-1"}} {
		wg.Go(func() { post(t, srv.URL+"/", r.key, r.po) })
	}
	for range 3 {
		<-arrived
	}
	close(release)
	wg.Wait()
	s := getStats(t, srv.URL)
	if s.MaxInFlightPerKey != 2 || s.MaxInFlightPerPO != 3 {
		t.Errorf("max in flight per key, per po = %d, %d; want 2, 3", s.MaxInFlightPerKey, s.MaxInFlightPerPO)
	}
}

func TestDialable(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:9099":   "127.0.0.1:9099",
		"[::]:9099":      "127.0.0.1:9099",
		"127.0.0.1:80":   "127.0.0.1:80",
		"[::1]:8080":     "[::1]:8080",
		"10.1.2.3:12345": "10.1.2.3:12345",
	} {
		addr, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := dialable(addr); got != want {
			t.Errorf("dialable(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestListenServesUntilClose(t *testing.T) {
	ls, err := listen("127.0.0.1:0", newSupplier(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := post(t, ls.URL+"/", "k", ""); got != http.StatusOK {
		t.Errorf("POST = %d, want 200", got)
	}
	http.DefaultClient.CloseIdleConnections()
	ls.close()
	if _, err := http.Post(ls.URL+"/", "text/plain", nil); err == nil {
		t.Error("server still answers after close")
	}
}
