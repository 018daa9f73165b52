package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// supplier stands in for the downstream system a push consumer calls: it
// counts requests per Idempotency-Key, so a run can tell whether each
// business action happened exactly once. It is safe for concurrent use.
//
// POST (any path) with an Idempotency-Key header records a hit and answers
// 200, or 500 for the first failFirst hits of each key; without the header it
// answers 400. A request for a poison order (the order_id of its JSON body
// is in poison) is refused for good, 422, until POST /fix. GET /stats
// answers the stats as JSON (?keys=1 adds the per-key counts).
type supplier struct {
	failFirst int
	// poison holds the order_ids refused with 422 until fixed; read-only
	// once the supplier serves.
	poison map[string]bool
	// work stands for the time the action takes, between counting a
	// request and answering it; it waits -supplier-delay by default.
	work func(context.Context)

	mu         sync.Mutex
	keys       map[string]*keyCount // guarded by mu
	poInFlight map[string]int       // requests in flight per Po-Id header; guarded by mu
	fixed      bool                 // POST /fix came: poison orders are accepted; guarded by mu
	stats      supplierStats        // running totals; key-derived fields filled by snapshot; guarded by mu
}

// keyCount is what the supplier saw for one Idempotency-Key.
type keyCount struct {
	Hits     int    `json:"hits"`
	Accepted int    `json:"accepted"`        // answered 200
	Order    string `json:"order,omitempty"` // the order_id of the body, when it has one
	inFlight int
}

// supplierStats is the supplier's summary, also served by GET /stats.
type supplierStats struct {
	Hits       int `json:"hits"`        // POSTs with a key
	Accepted   int `json:"accepted"`    // answered 200
	Refused    int `json:"refused"`     // answered 500 because of fail-first
	Poisoned   int `json:"poisoned"`    // answered 422: a poison order, not yet fixed
	MissingKey int `json:"missing_key"` // POSTs without Idempotency-Key (400)

	DistinctKeys             int `json:"distinct_keys"`
	KeysHitMoreThanOnce      int `json:"keys_hit_more_than_once"`
	KeysAcceptedMoreThanOnce int `json:"keys_accepted_more_than_once"`
	KeysNeverAccepted        int `json:"keys_never_accepted"`

	// MaxInFlightPerKey is the most requests of one key seen at the same
	// time; above 1 means the caller ran the action concurrently.
	MaxInFlightPerKey int `json:"max_in_flight_per_key"`
	// MaxInFlightPerPO is the same per Po-Id header (0 if none came); 1
	// means the caller serialized each purchase order.
	MaxInFlightPerPO int `json:"max_in_flight_per_po"`

	// RepeatedKeys lists up to 20 keys accepted more than once, sorted.
	RepeatedKeys []string            `json:"repeated_keys,omitempty"`
	Keys         map[string]keyCount `json:"keys,omitempty"`
}

const maxListedKeys = 20

func newSupplier(failFirst int, delay time.Duration) *supplier {
	return &supplier{
		failFirst:  failFirst,
		work:       func(ctx context.Context) { wait(ctx, delay) },
		keys:       map[string]*keyCount{},
		poInFlight: map[string]int{},
	}
}

func (s *supplier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/stats":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.snapshot(r.URL.Query().Get("keys") == "1"))
	case r.Method == http.MethodPost && r.URL.Path == "/fix":
		s.fix()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost:
		s.serveAction(w, r)
	default:
		w.Header().Set("Allow", "POST, GET")
		http.Error(w, "supplier: POST an action (with Idempotency-Key), POST /fix or GET /stats", http.StatusMethodNotAllowed)
	}
}

// fix makes the supplier accept the poison orders from now on: the cause
// of their refusal is mended, and a retry of them must now succeed.
func (s *supplier) fix() {
	s.mu.Lock()
	s.fixed = true
	s.mu.Unlock()
}

func (s *supplier) serveAction(w http.ResponseWriter, r *http.Request) {
	var body struct {
		OrderID string `json:"order_id"`
	}
	json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body) // a body that is no order has no order_id
	io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	key := r.Header.Get("Idempotency-Key")
	po := r.Header.Get("Po-Id")
	if key == "" {
		s.mu.Lock()
		s.stats.MissingKey++
		s.mu.Unlock()
		http.Error(w, "supplier: missing Idempotency-Key header", http.StatusBadRequest)
		return
	}

	// Step 1: count the hit and the overlap it creates.
	s.mu.Lock()
	k := s.keys[key]
	if k == nil {
		k = &keyCount{Order: body.OrderID}
		s.keys[key] = k
	}
	poisoned := s.poison[body.OrderID] && !s.fixed
	k.Hits++
	k.inFlight++
	hit := k.Hits
	s.stats.Hits++
	s.stats.MaxInFlightPerKey = max(s.stats.MaxInFlightPerKey, k.inFlight)
	if po != "" {
		s.poInFlight[po]++
		s.stats.MaxInFlightPerPO = max(s.stats.MaxInFlightPerPO, s.poInFlight[po])
	}
	s.mu.Unlock()

	// Step 2: the work itself.
	s.work(r.Context())

	// Step 3: answer, and count the answer.
	refuse := hit <= s.failFirst && !poisoned
	s.mu.Lock()
	k.inFlight--
	if po != "" {
		if s.poInFlight[po]--; s.poInFlight[po] == 0 {
			delete(s.poInFlight, po)
		}
	}
	switch {
	case poisoned:
		s.stats.Poisoned++
	case refuse:
		s.stats.Refused++
	default:
		k.Accepted++
		s.stats.Accepted++
	}
	s.mu.Unlock()
	if poisoned {
		// The words a real supplier would use for an order it can never
		// take: the endpoint's failure reason carries them.
		http.Error(w, fmt.Sprintf("supplier: order %s refused: unknown customer", body.OrderID), http.StatusUnprocessableEntity)
		return
	}
	if refuse {
		http.Error(w, fmt.Sprintf("supplier: failing hit %d of key %q on purpose", hit, key), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// snapshot returns the stats so far, with the per-key counts when withKeys.
func (s *supplier) snapshot(withKeys bool) supplierStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.DistinctKeys = len(s.keys)
	var repeated []string
	if withKeys {
		st.Keys = make(map[string]keyCount, len(s.keys))
	}
	for key, k := range s.keys {
		if k.Hits > 1 {
			st.KeysHitMoreThanOnce++
		}
		switch {
		case k.Accepted > 1:
			st.KeysAcceptedMoreThanOnce++
			repeated = append(repeated, key)
		case k.Accepted == 0:
			st.KeysNeverAccepted++
		}
		if withKeys {
			st.Keys[key] = *k
		}
	}
	slices.Sort(repeated)
	if len(repeated) > maxListedKeys {
		repeated = repeated[:maxListedKeys]
	}
	st.RepeatedKeys = repeated
	return st
}

// wait returns after d, or sooner when ctx is done.
func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// localServer is an HTTP server on a real TCP port, for the pieces a run
// starts itself (the supplier, the self-test endpoint).
type localServer struct {
	URL  string // http://host:port, with a loopback host when listening on all interfaces
	srv  *http.Server
	done chan struct{} // closed when Serve returned
}

// listen serves h on addr (host:port; port 0 picks a free one) until close.
func listen(addr string, h http.Handler) (*localServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ls := &localServer{
		URL:  "http://" + dialable(ln.Addr()),
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(ls.done)
		ls.srv.Serve(ln) // ErrServerClosed once close runs
	}()
	return ls, nil
}

// close stops the server. Requests in flight get a short grace period; it is
// short because a client's unused spare connection would otherwise hold
// Shutdown for 5 s, and by the time close runs the results are already in.
func (ls *localServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if ls.srv.Shutdown(ctx) != nil {
		ls.srv.Close()
	}
	<-ls.done
}

// dialable turns a listener address into one a client can dial: an
// unspecified host (":9099", "[::]:9099") becomes 127.0.0.1.
func dialable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
