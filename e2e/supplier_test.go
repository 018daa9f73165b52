package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// call is one request the supplier got.
type call struct {
	Key    string // its Idempotency-Key
	PO     string // its Po-Id header, if any
	Caller string // the example-run process that sent it: "name/life" (see instance)
	Hit    int    // 1 for the first request with this key, 2 for the next, …
}

// supplierOptions configure a supplier; the zero value accepts everything
// at once.
type supplierOptions struct {
	// FailFirst makes the first FailFirst requests of each key answer 500.
	FailFirst int
	// Refuse, if set, makes every request of the keys it accepts answer
	// 422: a poison message, which no retry can mend.
	Refuse func(key string) bool
	// Work runs between recording a request and answering it: the
	// supplier's own work. It may stall (return when ctx, the request's
	// context, ends) or crash the caller. Default: none.
	Work func(ctx context.Context, c call)
}

// supplier is the downstream system example-run calls: an HTTP server
// that is idempotent on the Idempotency-Key header, like a payment API.
// It records every request (raw hits) per key, so the tests can tell how
// often the action was sent as well as how many distinct actions took
// effect, and it measures how many requests of one purchase order (Po-Id
// header) were in flight at once. Each example-run process gets its own
// URL path, /i/<name>/<life>, so the supplier knows who called. It is safe
// for concurrent use.
type supplier struct {
	URL  string
	opts supplierOptions

	mu     sync.Mutex
	keys   map[string]*keyRecord // by Idempotency-Key; guarded by mu
	poBusy map[string]int        // requests in flight per Po-Id; guarded by mu
	poMax  map[string]int        // the most ever in flight per Po-Id; guarded by mu
	raw    int                   // requests with a key; guarded by mu
}

// keyRecord is what the supplier saw of one key.
type keyRecord struct {
	callers  []string // the caller of each request, in arrival order
	accepted int      // requests whose work was done (not failed on purpose)
}

// newSupplier starts a supplier for t, closed when t ends.
func newSupplier(t testing.TB, opts supplierOptions) *supplier {
	s := &supplier{opts: opts, keys: map[string]*keyRecord{}, poBusy: map[string]int{}, poMax: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *supplier) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	c := call{Key: r.Header.Get("Idempotency-Key"), PO: r.Header.Get("Po-Id")}
	if c.Key == "" || r.Method != http.MethodPost {
		http.Error(w, "supplier: POST with an Idempotency-Key header", http.StatusBadRequest)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/i/"); ok {
		c.Caller = rest
	}

	// Step 1: record the request and the overlap it creates.
	s.mu.Lock()
	k := s.keys[c.Key]
	if k == nil {
		k = &keyRecord{}
		s.keys[c.Key] = k
	}
	k.callers = append(k.callers, c.Caller)
	c.Hit = len(k.callers)
	s.raw++
	if c.PO != "" {
		s.poBusy[c.PO]++
		s.poMax[c.PO] = max(s.poMax[c.PO], s.poBusy[c.PO])
	}
	s.mu.Unlock()

	// Step 2: the work.
	refuse := s.opts.Refuse != nil && s.opts.Refuse(c.Key)
	fail := c.Hit <= s.opts.FailFirst || refuse
	if !fail && s.opts.Work != nil {
		s.opts.Work(r.Context(), c)
	}

	// Step 3: settle the record, then answer.
	s.mu.Lock()
	if c.PO != "" {
		s.poBusy[c.PO]--
	}
	if !fail {
		k.accepted++
	}
	s.mu.Unlock()
	switch {
	case refuse:
		http.Error(w, fmt.Sprintf("supplier: unknown customer in %q", c.Key), http.StatusUnprocessableEntity)
		return
	case fail:
		http.Error(w, fmt.Sprintf("supplier: failing request %d of %q on purpose", c.Hit, c.Key), http.StatusInternalServerError)
		return
	}

	w.WriteHeader(http.StatusOK)
}

// hits returns how many requests came with key.
func (s *supplier) hits(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil {
		return len(k.callers)
	}
	return 0
}

// accepted returns how many requests with key had their work done.
func (s *supplier) accepted(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil {
		return k.accepted
	}
	return 0
}

// callers returns who sent each request with key, in order.
func (s *supplier) callers(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil {
		return slices.Clone(k.callers)
	}
	return nil
}

// totals returns the raw request count and the number of distinct keys.
func (s *supplier) totals() (raw, distinct int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw, len(s.keys)
}

// maxBusy returns the most requests of purchase order po ever in flight
// at the same time.
func (s *supplier) maxBusy(po string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poMax[po]
}

// missing returns those of keys whose work was never done.
func (s *supplier) missing(keys []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, key := range keys {
		if k := s.keys[key]; k == nil || k.accepted == 0 {
			out = append(out, key)
		}
	}
	return out
}

// waitDone waits until the work of every key has been done.
func (s *supplier) waitDone(t testing.TB, keys []string, within time.Duration) {
	t.Helper()
	eventually(t, within, func() error {
		if m := s.missing(keys); len(m) > 0 {
			return fmt.Errorf("the supplier never did the work of %d of %d keys, e.g. %q", len(m), len(keys), m[:min(len(m), 5)])
		}
		return nil
	})
}

// stall returns a Work function that keeps every request busy for d (or
// until its caller hangs up): a slow supplier.
func stall(d time.Duration) func(context.Context, call) {
	return func(ctx context.Context, _ call) { pause(ctx, d) }
}
