package main

import (
	"net/http"
	"slices"
	"sync"
	"time"
)

// tally counts deliveries as they happen. It is safe for concurrent use.
type tally struct {
	mu         sync.Mutex
	deliveries int             // guarded by mu
	acks       int             // guarded by mu
	nacks      nackCounts      // guarded by mu
	status     map[int]int     // answers by status code; guarded by mu
	duplicates int             // injected lost acks; guarded by mu
	extraCopy  int             // second copies of concurrent rounds; guarded by mu
	maxAttempt int             // highest deliveryAttempt sent; guarded by mu
	latencies  []time.Duration // one per delivery; guarded by mu

	classes  map[string]*classTally // deliveries per class of order (classOf); guarded by mu
	copyAcks []time.Duration        // time-to-ack of each concurrent copy acked; guarded by mu
	copyDead int                    // concurrent copies dead-lettered before any ack; guarded by mu
}

// classTally counts the deliveries of one class of orders.
type classTally struct {
	deliveries int
	status     map[int]int // answers by status code
}

// nackCounts splits nacked deliveries by cause. 503 is apart from the other
// 5xx because it is how an idempotency guard says "in progress elsewhere".
type nackCounts struct {
	Client      int `json:"4xx"`
	Server      int `json:"5xx"`
	Unavailable int `json:"503"`
	Timeout     int `json:"timeout"`
	Error       int `json:"error"` // no answer: refused, reset, …
	Other       int `json:"other"` // 1xx, 203, 205-299, 3xx
}

func (n nackCounts) total() int {
	return n.Client + n.Server + n.Unavailable + n.Timeout + n.Error + n.Other
}

func newTally() *tally {
	return &tally{status: map[int]int{}, classes: map[string]*classTally{}}
}

// record counts one delivery of an order of class.
func (t *tally) record(o outcome, attempt int, class string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ct := t.classes[class]
	if ct == nil {
		ct = &classTally{status: map[int]int{}}
		t.classes[class] = ct
	}
	ct.deliveries++
	if o.status != 0 {
		ct.status[o.status]++
	}
	t.deliveries++
	t.maxAttempt = max(t.maxAttempt, attempt)
	t.latencies = append(t.latencies, o.latency)
	if o.status != 0 {
		t.status[o.status]++
	}
	switch {
	case o.ack():
		t.acks++
	case o.timeout:
		t.nacks.Timeout++
	case o.err != nil:
		t.nacks.Error++
	case o.status == http.StatusServiceUnavailable:
		t.nacks.Unavailable++
	case o.status >= 500:
		t.nacks.Server++
	case o.status >= 400:
		t.nacks.Client++
	default:
		t.nacks.Other++
	}
}

func (t *tally) duplicate() {
	t.mu.Lock()
	t.duplicates++
	t.mu.Unlock()
}

func (t *tally) concurrentRound(extra int) {
	t.mu.Lock()
	t.extraCopy += extra
	t.mu.Unlock()
}

// copyAcked records the time-to-ack of one concurrent copy.
func (t *tally) copyAcked(d time.Duration) {
	t.mu.Lock()
	t.copyAcks = append(t.copyAcks, d)
	t.mu.Unlock()
}

// copiesDeadLettered records n concurrent copies dead-lettered unacked.
func (t *tally) copiesDeadLettered(n int) {
	t.mu.Lock()
	t.copyDead += n
	t.mu.Unlock()
}

// percentile returns the p-th percentile (0 < p ≤ 1) of the delivery
// latencies, or 0 when there were none.
func (t *tally) percentile(p float64) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return percentile(t.latencies, p)
}

// percentile returns the p-th percentile (0 < p ≤ 1) of ds, nearest rank,
// or 0 when ds is empty. ds is not changed.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
