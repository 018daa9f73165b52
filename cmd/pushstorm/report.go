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

	// Classes counts apart the poison orders, the orders sent as
	// concurrent copies and the rest (see classOf).
	Classes map[string]*classReport `json:"classes"`
	// PoisonOrders is each poison order's fate (with -poison).
	PoisonOrders []poisonOrder `json:"poison_orders,omitempty"`
	// CopyTimeToAck is the time-to-ack of the concurrent copies.
	CopyTimeToAck *copyTimes `json:"copy_time_to_ack,omitempty"`

	Supplier    *supplierStats `json:"supplier,omitempty"`
	FailFirst   int            `json:"supplier_fail_first,omitempty"` // -supplier-fail-first
	Expected    *expectation   `json:"expected,omitempty"`            // with a supplier
	ExactlyOnce bool           `json:"exactly_once"`                  // the supplier accepted each expected key once

	OK       bool     `json:"ok"`
	Problems []string `json:"problems"` // why OK is false, one line each
}

// classReport is what happened to the orders of one class.
type classReport struct {
	Orders       int            `json:"orders"`
	Messages     int            `json:"messages"`
	Deliveries   int            `json:"deliveries"`
	Status       map[string]int `json:"status"` // answers by status code
	Acked        int            `json:"acked_messages"`
	DeadLettered int            `json:"dead_lettered_messages"`
	// BodyRuns is how many requests the supplier got for the class's
	// orders: each is one run of the endpoint's work (its body).
	BodyRuns int `json:"body_runs"`
	Accepted int `json:"supplier_accepted"`
}

// poisonOrder is the fate of one poison order.
type poisonOrder struct {
	OrderID      string `json:"order_id"`
	BodyRuns     int    `json:"body_runs"` // supplier requests
	Accepted     int    `json:"supplier_accepted"`
	Attempts     int    `json:"delivery_attempts"` // of its messages, copies not counted
	DeadLettered bool   `json:"dead_lettered"`
}

// copyTimes is the time-to-ack of the concurrent copies: for each copy,
// from the moment pushstorm sent it (attempt 1) to the moment it received
// the ack that settles it: the copy's own 2xx; for a copy nacked while the
// other copy was acked, that ack (the message is acked), or with
// -ack-each-copy the 2xx of the copy's own redelivery, backoff included;
// when no copy was acked, the ack of the message's redelivery.
type copyTimes struct {
	Copies       int     `json:"copies"` // sent: two per concurrent round
	Acked        int     `json:"acked"`
	DeadLettered int     `json:"dead_lettered"`
	P50Millis    float64 `json:"p50_ms"`
	P99Millis    float64 `json:"p99_ms"`
	MaxMillis    float64 `json:"max_ms"`
}

// newReport summarizes res; sup is nil when no supplier ran. With the
// per-key counts in sup (snapshot(true)), the report counts the supplier's
// requests per class; the report keeps sup without them.
func newReport(cfg config, seed int64, res *runResult, sup *supplierStats) *report {
	var keys map[string]keyCount
	if sup != nil {
		s := *sup
		keys, s.Keys = s.Keys, nil
		sup = &s
	}
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
	r.Classes = classReports(t)
	if len(t.copyAcks) > 0 || t.copyDead > 0 {
		r.CopyTimeToAck = &copyTimes{Copies: 2 * t.extraCopy, Acked: len(t.copyAcks), DeadLettered: t.copyDead,
			P50Millis: millis(percentile(t.copyAcks, 0.50)), P99Millis: millis(percentile(t.copyAcks, 0.99)), MaxMillis: millis(percentile(t.copyAcks, 1))}
	}
	t.mu.Unlock()
	if cfg.ReplayDead != "" {
		r.Orders = len(res.class)
	}
	r.LatencyP50Millis = millis(t.percentile(0.50))
	r.LatencyP99Millis = millis(t.percentile(0.99))
	if res.elapsed > 0 {
		r.DeliveriesPerSecond = float64(r.Deliveries) / res.elapsed.Seconds()
	}
	r.countClasses(res, keys)
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
			sup.KeysAcceptedMoreThanOnce == 0 && sup.KeysNeverAccepted == poisonNeverAccepted(keys, res.poison) && sup.MissingKey == 0
	}
	r.Problems = r.problems(cfg, res)
	r.OK = len(r.Problems) == 0
	return r
}

// classReports starts the per-class counts with the deliveries of t, whose
// lock the caller holds.
func classReports(t *tally) map[string]*classReport {
	cs := make(map[string]*classReport, len(classNames))
	for _, name := range classNames {
		cr := &classReport{Status: map[string]int{}}
		if ct := t.classes[name]; ct != nil {
			cr.Deliveries = ct.deliveries
			for code, n := range ct.status {
				cr.Status[strconv.Itoa(code)] = n
			}
		}
		cs[name] = cr
	}
	return cs
}

// countClasses adds the orders, messages and their fates to r.Classes,
// the supplier's requests per class from keys (the per-key counts, nil
// without a supplier), and lists the poison orders.
func (r *report) countClasses(res *runResult, keys map[string]keyCount) {
	for _, class := range res.class {
		r.Classes[class].Orders++
	}
	poison := map[string]*poisonOrder{}
	for id := range res.poison {
		if res.class[id] != "" {
			poison[id] = &poisonOrder{OrderID: id}
		}
	}
	for _, st := range res.msgs {
		cr := r.Classes[res.class[st.m.orderID]]
		cr.Messages++
		switch st.final {
		case acked:
			cr.Acked++
		case deadLettered:
			cr.DeadLettered++
		}
		if p := poison[st.m.orderID]; p != nil {
			p.Attempts += st.attempts
			p.DeadLettered = p.DeadLettered || st.final == deadLettered
		}
	}
	for _, k := range keys {
		if cr := r.Classes[res.class[k.Order]]; cr != nil {
			cr.BodyRuns += k.Hits
			cr.Accepted += k.Accepted
		}
		if p := poison[k.Order]; p != nil {
			p.BodyRuns += k.Hits
			p.Accepted += k.Accepted
		}
	}
	for _, p := range poison {
		r.PoisonOrders = append(r.PoisonOrders, *p)
	}
	slices.SortFunc(r.PoisonOrders, func(a, b poisonOrder) int { return strings.Compare(a.OrderID, b.OrderID) })
}

// poisonNeverAccepted counts the keys of poison orders the supplier never
// accepted: refused for good, as planned.
func poisonNeverAccepted(keys map[string]keyCount, poison map[string]bool) int {
	n := 0
	for _, k := range keys {
		if k.Accepted == 0 && poison[k.Order] {
			n++
		}
	}
	return n
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// problems lists what makes the run fail: dead letters, lost messages, and
// with -expect-once anything short of one accepted action per expected key.
func (r *report) problems(cfg config, res *runResult) []string {
	var ps []string
	var unplanned []string // dead letters of orders that are not poison
	for _, id := range r.DeadLettered {
		if !res.poison[orderOf(res, id)] {
			unplanned = append(unplanned, id)
		}
	}
	if n := len(unplanned); n > 0 {
		ps = append(ps, fmt.Sprintf("%d of %d messages dead-lettered after %d attempts: %s",
			n, r.Messages, cfg.MaxAttempts, describeIDs(res, unplanned)))
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

// orderOf returns the order_id of the message id of res.
func orderOf(res *runResult, id string) string {
	for _, st := range res.msgs {
		if st.m.id == id {
			return st.m.orderID
		}
	}
	return ""
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
	row("by class of order", "")
	for _, name := range classNames {
		c := r.Classes[name]
		if c == nil || c.Orders == 0 {
			continue
		}
		row("  "+name, "%d orders, %d messages: %d deliveries (%s), %d acked, %d dead-lettered; %d body runs, %d accepted",
			c.Orders, c.Messages, c.Deliveries, statusLine(c.Status), c.Acked, c.DeadLettered, c.BodyRuns, c.Accepted)
	}
	if ct := r.CopyTimeToAck; ct != nil {
		row("copy time-to-ack", "p50 %.1fms / p99 %.1fms / max %.1fms (%d copies, %d acked, %d dead-lettered)",
			ct.P50Millis, ct.P99Millis, ct.MaxMillis, ct.Copies, ct.Acked, ct.DeadLettered)
	}
	if s := r.Supplier; s != nil {
		poisoned := ""
		if s.Poisoned > 0 {
			poisoned = fmt.Sprintf(", %d refused as poison (422)", s.Poisoned)
		}
		row("supplier requests", "%d (%d accepted, %d refused by -supplier-fail-first%s, %d without key)",
			s.Hits, s.Accepted, s.Refused, poisoned, s.MissingKey)
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
	if p := r.Classes[classPoison]; p != nil && p.Orders > 0 {
		ls = append(ls, fmt.Sprintf("  poison %d orders: planned (-poison): the supplier refuses them with 422 until fixed; their %d body runs are the cost of retrying what cannot succeed, and their %d dead letters are expected",
			p.Orders, p.BodyRuns, p.DeadLettered))
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

func (r *report) statusLine() string { return statusLine(r.Status) }

// statusLine renders counts by status code, "none" when empty.
func statusLine(status map[string]int) string {
	if len(status) == 0 {
		return "none"
	}
	codes := slices.Sorted(maps.Keys(status))
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s=%d", c, status[c])
	}
	return strings.Join(parts, " ")
}
