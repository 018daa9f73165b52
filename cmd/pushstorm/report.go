package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report is the outcome of a run, printed as a table or as JSON.
type report struct {
	Target      string `json:"target"`
	Form        string `json:"form"`
	Seed        int64  `json:"seed"`
	Orders      int    `json:"orders"`
	Messages    int    `json:"messages"` // published: orders + republishes
	Republishes int    `json:"republishes"`

	Deliveries          int            `json:"deliveries"`
	Acks                int            `json:"acks"`
	Nacks               int            `json:"nacks"`
	NacksBy             nackCounts     `json:"nacks_by"`
	Status              map[string]int `json:"status"`
	TransportDuplicates int            `json:"transport_duplicates"`
	ConcurrentCopies    int            `json:"concurrent_copies"`
	MaxDeliveryAttempt  int            `json:"max_delivery_attempt"`

	AckedMessages int      `json:"acked_messages"`
	DeadLettered  []string `json:"dead_lettered"` // messageIds
	Lost          []string `json:"lost"`          // messageIds
	Interrupted   bool     `json:"interrupted,omitempty"`

	DurationSeconds     float64 `json:"duration_seconds"`
	DeliveriesPerSecond float64 `json:"deliveries_per_second"`
	LatencyP50Millis    float64 `json:"latency_p50_ms"`
	LatencyP99Millis    float64 `json:"latency_p99_ms"`

	Supplier    *supplierStats `json:"supplier,omitempty"`
	FailFirst   int            `json:"supplier_fail_first,omitempty"` // -supplier-fail-first
	Expected    *expectation   `json:"expected,omitempty"`            // with a supplier
	ExactlyOnce bool           `json:"exactly_once"`                  // the supplier accepted each expected key once

	OK       bool     `json:"ok"`
	Problems []string `json:"problems"` // why OK is false, one line each
}

// newReport summarizes res; sup is nil when no supplier ran.
func newReport(cfg config, seed int64, res *runResult, sup *supplierStats) *report {
	t := res.tally
	t.mu.Lock()
	r := &report{
		Target:              cfg.URL,
		Form:                cfg.Form,
		Seed:                seed,
		Orders:              cfg.N,
		Messages:            len(res.msgs),
		Deliveries:          t.deliveries,
		Acks:                t.acks,
		Nacks:               t.nacks.total(),
		NacksBy:             t.nacks,
		Status:              map[string]int{},
		TransportDuplicates: t.duplicates,
		ConcurrentCopies:    t.extraCopy,
		MaxDeliveryAttempt:  t.maxAttempt,
		DeadLettered:        []string{},
		Lost:                []string{},
		Interrupted:         res.interrupted,
		DurationSeconds:     res.elapsed.Seconds(),
		Supplier:            sup,
		FailFirst:           cfg.SupplierFailFirst,
	}
	for code, n := range t.status {
		r.Status[strconv.Itoa(code)] = n
	}
	t.mu.Unlock()
	r.LatencyP50Millis = millis(t.percentile(0.50))
	r.LatencyP99Millis = millis(t.percentile(0.99))
	if res.elapsed > 0 {
		r.DeliveriesPerSecond = float64(r.Deliveries) / res.elapsed.Seconds()
	}
	for _, st := range res.msgs {
		if st.m.republish {
			r.Republishes++
		}
		switch st.final {
		case acked:
			r.AckedMessages++
		case deadLettered:
			r.DeadLettered = append(r.DeadLettered, st.m.id)
		default:
			r.Lost = append(r.Lost, st.m.id)
		}
	}
	if sup != nil {
		e := cfg.expectedKeys(r.Orders, r.Messages)
		r.Expected = &e
		r.ExactlyOnce = sup.DistinctKeys == e.Keys &&
			sup.KeysAcceptedMoreThanOnce == 0 && sup.KeysNeverAccepted == 0 && sup.MissingKey == 0
	}
	r.Problems = r.problems(cfg, res)
	r.OK = len(r.Problems) == 0
	return r
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// problems lists what makes the run fail: dead letters, lost messages, and
// with -expect-once anything short of one accepted action per expected key.
func (r *report) problems(cfg config, res *runResult) []string {
	var ps []string
	if n := len(r.DeadLettered); n > 0 {
		ps = append(ps, fmt.Sprintf("%d of %d messages dead-lettered after %d attempts: %s",
			n, r.Messages, cfg.MaxAttempts, describeIDs(res, r.DeadLettered)))
	}
	if n := len(r.Lost); n > 0 {
		why := "never acked and not dead-lettered"
		if r.Interrupted {
			why = "unfinished: the run was interrupted"
		}
		ps = append(ps, fmt.Sprintf("%d of %d messages lost (%s): %s", n, r.Messages, why, describeIDs(res, r.Lost)))
	}
	if cfg.ExpectOnce && r.Supplier != nil && !r.ExactlyOnce {
		s := r.Supplier
		ps = append(ps, fmt.Sprintf("-expect-once: supplier saw %d distinct keys, want %d (%s); %d accepted more than once, %d never accepted, %d requests without a key",
			s.DistinctKeys, r.Expected.Keys, r.Expected.Why, s.KeysAcceptedMoreThanOnce, s.KeysNeverAccepted, s.MissingKey))
		if len(s.RepeatedKeys) > 0 {
			ps = append(ps, "keys accepted more than once: "+strings.Join(s.RepeatedKeys, ", "))
		}
	}
	return ps
}

// describeIDs renders up to 10 messageIds with their order, then a count.
func describeIDs(res *runResult, ids []string) string {
	orderOf := make(map[string]string, len(ids))
	for _, st := range res.msgs {
		orderOf[st.m.id] = st.m.orderID
	}
	const shown = 10
	parts := make([]string, 0, shown+1)
	for _, id := range ids[:min(len(ids), shown)] {
		parts = append(parts, fmt.Sprintf("%s (%s)", id, orderOf[id]))
	}
	if len(ids) > shown {
		parts = append(parts, fmt.Sprintf("and %d more", len(ids)-shown))
	}
	return strings.Join(parts, ", ")
}

// writeJSON prints r as one indented JSON object.
func (r *report) writeJSON(w io.Writer) error { return writeIndentedJSON(w, r) }

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeText prints r as a two-column table, then the verdict lines.
func (r *report) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", name, fmt.Sprintf(format, args...))
	}
	row("target", "%s (%s, seed %d)", r.Target, r.Form, r.Seed)
	row("orders", "%d", r.Orders)
	row("messages published", "%d", r.Messages)
	row("republishes", "%d", r.Republishes)
	row("deliveries", "%d", r.Deliveries)
	row("acks", "%d", r.Acks)
	n := r.NacksBy
	row("nacks", "%d (4xx %d, 5xx %d, 503 %d, timeout %d, error %d, other %d)",
		r.Nacks, n.Client, n.Server, n.Unavailable, n.Timeout, n.Error, n.Other)
	row("status codes", "%s", r.statusLine())
	row("duplicates sent", "%d (redelivered after a lost ack)", r.TransportDuplicates)
	row("concurrent copies", "%d", r.ConcurrentCopies)
	row("max deliveryAttempt", "%d", r.MaxDeliveryAttempt)
	row("acked messages", "%d", r.AckedMessages)
	row("dead-lettered", "%d", len(r.DeadLettered))
	row("lost", "%d", len(r.Lost))
	row("duration", "%v", time.Duration(r.DurationSeconds*float64(time.Second)).Round(time.Millisecond))
	row("deliveries/s", "%.1f", r.DeliveriesPerSecond)
	row("latency p50 / p99", "%.2fms / %.2fms", r.LatencyP50Millis, r.LatencyP99Millis)
	if s := r.Supplier; s != nil {
		row("supplier requests", "%d (%d accepted, %d refused by -supplier-fail-first, %d without key)",
			s.Hits, s.Accepted, s.Refused, s.MissingKey)
		row("supplier keys", "%d distinct (expected %d, %s)", s.DistinctKeys, r.Expected.Keys, r.Expected.Why)
		row("keys hit more than once", "%d", s.KeysHitMoreThanOnce)
		row("keys accepted more than once", "%d", s.KeysAcceptedMoreThanOnce)
		row("keys never accepted", "%d", s.KeysNeverAccepted)
		row("max in flight per key", "%d", s.MaxInFlightPerKey)
		if s.MaxInFlightPerPO > 0 {
			row("max in flight per po", "%d", s.MaxInFlightPerPO)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range r.legend() {
		fmt.Fprintln(w, l)
	}
	if line := r.onceLine(); line != "" {
		fmt.Fprintln(w, line)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "FAIL: "+p)
	}
	if r.OK {
		_, err := fmt.Fprintln(w, "OK")
		return err
	}
	return nil
}

// legend explains the figures of the table that look like failures but
// are the storm's plan: the supplier's refusals on purpose, the copies
// that find their key held, the duplicates answered unrun.
func (r *report) legend() []string {
	var ls []string
	s := r.Supplier
	if n := r.NacksBy.Server; n > 0 && s != nil && s.Refused > 0 {
		first := "the first"
		if r.FailFirst > 1 {
			first = fmt.Sprintf("the first %d", r.FailFirst)
		}
		ls = append(ls, fmt.Sprintf("  5xx %d: planned: the supplier refused %d requests (-supplier-fail-first %d: %s of each key), so the endpoint answered 500 and the message was redelivered",
			n, s.Refused, r.FailFirst, first))
	}
	if n := r.NacksBy.Unavailable; n > 0 {
		ls = append(ls, fmt.Sprintf("  503 %d: a copy came while another delivery held its key; redelivered later, not run twice", n))
	}
	if d := r.TransportDuplicates + r.ConcurrentCopies + r.Republishes; d > 0 {
		ls = append(ls, fmt.Sprintf("  duplicates sent + concurrent copies + republishes = %d: sent on purpose; a copy of a done key is acked unrun (204)", d))
	}
	if s != nil && s.KeysHitMoreThanOnce > 0 && s.Refused > 0 {
		ls = append(ls, fmt.Sprintf("  keys hit more than once %d: the keys retried after a refusal; \"keys accepted more than once\" is the figure that must be 0", s.KeysHitMoreThanOnce))
	}
	if len(ls) > 0 {
		ls = append([]string{"what the figures mean:"}, ls...)
	}
	return ls
}

// onceLine is the headline about the supplier: every expected key accepted
// exactly once, or the counts that say otherwise.
func (r *report) onceLine() string {
	s := r.Supplier
	if s == nil {
		return ""
	}
	unit := r.Expected.Unit
	if r.ExactlyOnce {
		return fmt.Sprintf("%d %s, each delivered to the supplier exactly once", s.DistinctKeys, unit)
	}
	return fmt.Sprintf("NOT exactly once: the supplier saw %d distinct keys for %d expected %s; %d accepted more than once, %d never accepted",
		s.DistinctKeys, r.Expected.Keys, unit, s.KeysAcceptedMoreThanOnce, s.KeysNeverAccepted)
}

func (r *report) statusLine() string {
	if len(r.Status) == 0 {
		return "none"
	}
	codes := slices.Sorted(maps.Keys(r.Status))
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s=%d", c, r.Status[c])
	}
	return strings.Join(parts, " ")
}
