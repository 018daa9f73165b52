package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeResult is a finished run with the given final states, one message per
// entry, ids 1000000000000001…, orders o-000001….
func fakeResult(finals ...int) *runResult {
	res := &runResult{tally: newTally(), elapsed: 2 * time.Second}
	for i, f := range finals {
		m := &message{seq: i, id: "100000000000000" + string(rune('1'+i)), orderID: "o-00000" + string(rune('1'+i))}
		res.msgs = append(res.msgs, &msgState{m: m, final: f})
	}
	ms := make([]*message, len(res.msgs))
	for i, st := range res.msgs {
		ms[i] = st.m
	}
	res.class = classes(ms, nil)
	return res
}

func TestReportCounts(t *testing.T) {
	res := fakeResult(acked, acked, deadLettered, pending)
	res.msgs[1].m.republish = true
	for _, o := range []outcome{{status: 200}, {status: 200}, {status: 500}, {status: 503}, {timeout: true, err: errTest}} {
		res.tally.record(o, 2, classNormal)
	}
	c := testConfig("http://h/")
	c.N, c.MaxAttempts = 3, 5
	r := newReport(c, 42, res, nil)
	if r.Messages != 4 || r.Orders != 3 || r.Republishes != 1 || r.AckedMessages != 2 {
		t.Errorf("messages %d orders %d republishes %d acked %d; want 4 3 1 2", r.Messages, r.Orders, r.Republishes, r.AckedMessages)
	}
	if r.Deliveries != 5 || r.Acks != 2 || r.Nacks != 3 || r.DeliveriesPerSecond != 2.5 || r.MaxDeliveryAttempt != 2 {
		t.Errorf("deliveries %d acks %d nacks %d rate %v max attempt %d; want 5 2 3 2.5 2",
			r.Deliveries, r.Acks, r.Nacks, r.DeliveriesPerSecond, r.MaxDeliveryAttempt)
	}
	if !slices.Equal(r.DeadLettered, []string{"1000000000000003"}) || !slices.Equal(r.Lost, []string{"1000000000000004"}) {
		t.Errorf("dead-lettered %v, lost %v; want the 3rd and the 4th message", r.DeadLettered, r.Lost)
	}
	if r.OK {
		t.Error("a run with a dead letter and a lost message reported OK")
	}
	wantProblems := []string{
		"1 of 4 messages dead-lettered after 5 attempts: 1000000000000003 (o-000003)",
		"1 of 4 messages lost (never acked and not dead-lettered): 1000000000000004 (o-000004)",
	}
	if !slices.Equal(r.Problems, wantProblems) {
		t.Errorf("problems:\n got %q\nwant %q", r.Problems, wantProblems)
	}
}

var errTest = bytes.ErrTooLarge // any error will do

func TestReportExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sup      supplierStats
		url      string
		once     bool
		wantLine string
	}{
		{"orders once", supplierStats{DistinctKeys: 3, Hits: 5, Accepted: 3}, "http://h/orders", true,
			"3 orders, each delivered to the supplier exactly once"},
		{"messages once", supplierStats{DistinctKeys: 4, Hits: 4, Accepted: 4}, "http://h/", true,
			"4 messages, each delivered to the supplier exactly once"},
		{"republish leaked", supplierStats{DistinctKeys: 4, Hits: 4, Accepted: 4}, "http://h/orders", false,
			"NOT exactly once: the supplier saw 4 distinct keys for 3 expected orders; 0 accepted more than once, 0 never accepted"},
		{"twice", supplierStats{DistinctKeys: 3, Hits: 4, Accepted: 4, KeysAcceptedMoreThanOnce: 1, RepeatedKeys: []string{"o-000002"}}, "http://h/orders", false,
			"NOT exactly once: the supplier saw 3 distinct keys for 3 expected orders; 1 accepted more than once, 0 never accepted"},
		{"never accepted", supplierStats{DistinctKeys: 3, Hits: 4, Accepted: 2, Refused: 2, KeysNeverAccepted: 1}, "http://h/orders", false,
			"NOT exactly once: the supplier saw 3 distinct keys for 3 expected orders; 0 accepted more than once, 1 never accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := fakeResult(acked, acked, acked, acked)
			res.msgs[3].m.republish = true
			c := testConfig(tc.url)
			c.N, c.ExpectOnce, c.SupplierAddr = 3, true, ":0"
			r := newReport(c, 1, res, &tc.sup)
			if r.ExactlyOnce != tc.once || r.OK != tc.once {
				t.Errorf("exactly_once=%v ok=%v, want %v (with -expect-once)", r.ExactlyOnce, r.OK, tc.once)
			}
			if got := r.onceLine(); got != tc.wantLine {
				t.Errorf("headline:\n got %q\nwant %q", got, tc.wantLine)
			}
			c.ExpectOnce = false
			if r := newReport(c, 1, res, &tc.sup); !r.OK {
				t.Errorf("without -expect-once the supplier's counts must not fail the run: %v", r.Problems)
			}
		})
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	res := fakeResult(acked, deadLettered)
	res.tally.record(outcome{status: 204}, 1, classNormal)
	r := newReport(testConfig("http://h/"), 9, res, &supplierStats{DistinctKeys: 1})
	var buf bytes.Buffer
	if err := r.writeJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("JSON report does not parse: %v", err)
	}
	for _, key := range []string{"deliveries", "acks", "nacks_by", "status", "dead_lettered", "lost", "supplier",
		"expected", "deliveries_per_second", "ok", "problems", "seed"} {
		if _, ok := back[key]; !ok {
			t.Errorf("JSON report lacks %q", key)
		}
	}
	if back["ok"] != false || back["status"].(map[string]any)["204"] != 1.0 {
		t.Errorf("ok=%v status=%v; want false and 204:1", back["ok"], back["status"])
	}
}

func TestReportTextSupplierRows(t *testing.T) {
	res := fakeResult(acked)
	c := testConfig("http://h/orders")
	c.N = 1
	r := newReport(c, 1, res, &supplierStats{DistinctKeys: 1, Hits: 2, Accepted: 1, Refused: 1, MaxInFlightPerKey: 1})
	var buf bytes.Buffer
	if err := r.writeText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"supplier requests", "2 (1 accepted, 1 refused by -supplier-fail-first, 0 without key)",
		"1 orders, each delivered to the supplier exactly once",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "max in flight per po") {
		t.Errorf("per-PO row shown although no Po-Id came:\n%s", out)
	}
}

func TestDescribeIDsTruncates(t *testing.T) {
	res := &runResult{}
	var ids []string
	for i := range 13 {
		id := strings.Repeat("9", 15) + string(rune('a'+i))
		ids = append(ids, id)
		res.msgs = append(res.msgs, &msgState{m: &message{id: id, orderID: "o"}})
	}
	got := describeIDs(res, ids)
	if !strings.HasSuffix(got, ", and 3 more") || strings.Count(got, "(o)") != 10 {
		t.Errorf("describeIDs = %q, want 10 ids then \"and 3 more\"", got)
	}
}

// TestReportLegend: the figures a demo reader takes for failures (the
// 5xx of the planned refusals, keys hit more than once) are explained in
// the text report, with the counts and the flag that plans them; a run
// without refusals gets no such line.
func TestReportLegend(t *testing.T) {
	res := fakeResult(acked, acked)
	for _, o := range []outcome{{status: 500}, {status: 500}, {status: 503}, {status: 200}, {status: 200}} {
		res.tally.record(o, 1, classNormal)
	}
	c := testConfig("http://h/orders")
	c.N = 2
	c.SupplierFailFirst = 1
	r := newReport(c, 1, res, &supplierStats{DistinctKeys: 2, Hits: 4, Accepted: 2, Refused: 2, KeysHitMoreThanOnce: 2, MaxInFlightPerKey: 1})
	var buf bytes.Buffer
	if err := r.writeText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"what the figures mean:",
		"5xx 2: planned: the supplier refused 2 requests (-supplier-fail-first 1: the first of each key)",
		"503 1: a copy came while another delivery held its key",
		`keys hit more than once 2: the keys retried after a refusal; "keys accepted more than once" is the figure that must be 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}

	plain := newReport(testConfig("http://h/orders"), 1, fakeResult(acked), &supplierStats{DistinctKeys: 1, Hits: 1, Accepted: 1})
	buf.Reset()
	if err := plain.writeText(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "what the figures mean") {
		t.Errorf("a run with nothing to explain has a legend:\n%s", buf.String())
	}
}
