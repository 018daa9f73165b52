package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/fakeclock"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
	"github.com/idemgate/idemgate/store/sqlstore"
	"github.com/idemgate/idemgate/storeurl"
)

// failKey claims key as the delivery push/m-KEY would and fails the
// claim's work for reason: for good when final, else counted (the claim
// is released, the record keeps the count). It fails t when st cannot
// record failures: every store of the module implements store.Failer.
func failKey(t *testing.T, st store.Store, key, reason string, final bool) {
	t.Helper()
	f, ok := st.(store.Failer)
	if !ok {
		t.Fatalf("%T does not implement store.Failer: failed and retry need it", st)
	}
	c, err := st.Claim(t.Context(), key, time.Minute, store.ClaimOptions{Origin: "push/m-" + key})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim(%q) = %v, %v; want Won", key, c.Status, err)
	}
	n, failed, err := f.Fail(t.Context(), c, store.Failure{Reason: reason, Final: final})
	if err != nil || failed != final || n == 0 {
		t.Fatalf("Fail(%q, final %v) = %d, %v, %v; want a count and failed %v", key, final, n, failed, err, final)
	}
}

// seedFailed adds to st, in this order: order-1 and order-2 FAILED for
// "card declined", order-3 FAILED for "timeout: upstream", and order-4
// held after two counted failures, the last "flaky".
func seedFailed(t *testing.T, st store.Store) {
	t.Helper()
	failKey(t, st, "order-1", "card declined", true)
	failKey(t, st, "order-2", "card declined", true)
	failKey(t, st, "order-3", "timeout: upstream", true)
	failKey(t, st, "order-4", "flaky", false)
	failKey(t, st, "order-4", "flaky", false)
	if c, err := st.Claim(t.Context(), "order-4", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.Won {
		t.Fatalf("Claim(order-4) after two counted failures = %v, %v; want Won", c.Status, err)
	}
}

// memOpened is a memory store as storeurl opens it, for the commands'
// parts that take an opened store: the commands themselves refuse
// memory://, which no other process can see.
func memOpened(t *testing.T) *storeurl.Opened {
	t.Helper()
	clock := fakeclock.Stepping(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Millisecond)
	m, err := memstore.New(&memstore.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &storeurl.Opened{Store: m, Name: "memory", Addr: "memory://"}
}

// memFailed seeds a memory store with seedFailed and returns it with its
// FAILED records that sel selects, grouped.
func memFailed(t *testing.T, sel selection) (*storeurl.Opened, []failGroup) {
	t.Helper()
	o := memOpened(t)
	seedFailed(t, o.Store)
	x, err := lister(o)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := failedRecords(t.Context(), x, sel)
	if err != nil {
		t.Fatal(err)
	}
	return o, groupFailed(rs)
}

// The FAILED records are read from every page (here pages of one), grouped by reason, the
// largest group first, the newest failure first within one; -reason
// keeps a prefix of the reason.
func TestFailedGroups(t *testing.T) {
	o, groups := memFailed(t, selection{pageLimit: 1})
	var got []string
	for _, g := range groups {
		var keys []string
		for _, r := range g.records {
			keys = append(keys, r.Key)
		}
		got = append(got, fmt.Sprintf("%s: %s", g.reason, strings.Join(keys, ",")))
	}
	if want := []string{"card declined: order-2,order-1", "timeout: upstream: order-3"}; !slices.Equal(got, want) {
		t.Errorf("groups = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		sel  selection
		want int
	}{
		{selection{reason: "card"}, 2},
		{selection{reason: "card declined"}, 2},
		{selection{reason: "declined"}, 0},
		{selection{prefix: "order-3"}, 1},
		{selection{olderThan: time.Hour}, 0},
	} {
		x, _ := lister(o)
		rs, err := failedRecords(t.Context(), x, tc.sel)
		if err != nil || len(rs) != tc.want {
			t.Errorf("failedRecords(%+v) = %d records, %v; want %d", tc.sel, len(rs), err, tc.want)
		}
	}
}

// failed's text answer: the summary first, a group per reason, a line per
// key with its attempts, first failure, failed at, origin and fence; its
// JSON answer: the counts, then the records in the same order.
func TestFailedOutput(t *testing.T) {
	o, groups := memFailed(t, selection{})
	var out bytes.Buffer
	writeFailed(&out, o, selection{}, groups, nil)
	text := out.String()
	r1 := groups[0].records[1]
	for _, want := range []string{
		"3 failed keys, 2 reasons\n",
		`reason:   "card declined" (2 keys)`,
		`reason:   "timeout: upstream" (1 key)`,
		"KEY        ATTEMPTS  FIRST FAILURE             FAILED AT                 ORIGIN          FENCE",
		fmt.Sprintf(`"order-1"  1         %s  %s  push/m-order-1  %d`, stamp(r1.FirstFailure), stamp(r1.FailedAt()), r1.Fence),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("failed printed\n%s\nwithout %q", text, want)
		}
	}
	if !strings.HasPrefix(text, "3 failed keys") || strings.Index(text, `"order-2"`) > strings.Index(text, `"order-1"`) {
		t.Errorf("failed printed\n%s\nwant the summary first and the newest failure (order-2) first", text)
	}

	out.Reset()
	if err := writeFailedJSON(&out, o, groups, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var head failedJSON
	if err := json.Unmarshal([]byte(lines[0]), &head); err != nil {
		t.Fatal(err)
	}
	if want := []reasonCount{{"card declined", 2}, {"timeout: upstream", 1}}; head.Failed != 3 || !slices.Equal(head.Reasons, want) {
		t.Errorf("failed -json counts = %+v, want 3 failed and %v", head, want)
	}
	var keys []string
	for _, l := range lines[1:] {
		var j jsonRecord
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatal(err)
		}
		if j.Status != "failed" || j.Attempts != 1 || j.FailedAt == nil || j.FirstFailure == nil || j.LeaseUntil != nil || j.Origin != "push/m-"+j.Key {
			t.Errorf("failed -json record = %s; want failed, 1 attempt, failedAt and firstFailure, no leaseUntil, its origin", l)
		}
		keys = append(keys, j.Key)
	}
	if want := []string{"order-2", "order-1", "order-3"}; !slices.Equal(keys, want) {
		t.Errorf("failed -json keys = %q, want %q", keys, want)
	}
}

// inspect shows a FAILED record's attempts, reason, first failure and
// failed at, and a held record's failures so far.
func TestInspectFailures(t *testing.T) {
	o := memOpened(t)
	seedFailed(t, o.Store)
	x, _ := inspector(o)
	for key, want := range map[string][]string{
		"order-1": {"status:     failed: the work failed for good", "failed:     last run by push/m-order-1, fence ",
			"attempts:   1 failed\n", "reason:     card declined\n", "first fail: 2026-03-01T", "failed at:  2026-03-01T"},
		"order-4": {"status:     held", "failures:   2 failed attempts so far, last: flaky\n", "first fail: 2026-03-01T", "lease:      "},
	} {
		r, ok, err := x.Inspect(t.Context(), key)
		if err != nil || !ok {
			t.Fatalf("Inspect(%q) = %v, %v", key, ok, err)
		}
		var out bytes.Buffer
		writeRecord(&out, o, key, r, ok, nearby{})
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("inspect %s printed\n%s\nwithout %q", key, out.String(), w)
			}
		}
		if key == "order-4" && strings.Contains(out.String(), "failed at:") || key == "order-1" && strings.Contains(out.String(), "lease:") {
			t.Errorf("inspect %s printed\n%s\na held record has no failed at, a FAILED one no lease", key, out.String())
		}
	}
}

// failedOnBackend seeds the FAILED records of seedFailed in a fresh store
// of b, with seed's records beside them, and returns its URL and store.
func failedOnBackend(t *testing.T, b backend) (string, store.Store) {
	t.Helper()
	url := b.url(t)
	s := seed(t, url)
	seedFailed(t, s.st)
	return url, s.st
}

// TestFailed runs failed against every real store. It needs the store's
// store.Failer.
func TestFailed(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url, _ := failedOnBackend(t, b)

			r := idemgate(t, "", "failed", "-store", url)
			if r.code != exitOK || !strings.HasPrefix(r.stdout, "3 failed keys, 2 reasons") ||
				!strings.Contains(r.stdout, `reason:   "card declined" (2 keys)`) || !strings.Contains(r.stdout, "push/m-order-3") {
				t.Errorf("failed = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			// Newest failure first: a store whose clock reads milliseconds
			// (SQLite) may fail order-1 and order-2 in the same one, and
			// then lists them in key order.
			r = idemgate(t, "", "failed", "-store", url, "-json")
			var failedAt []time.Time
			for i, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var j jsonRecord
				if err := json.Unmarshal([]byte(line), &j); err != nil || i > 0 && j.FailedAt == nil {
					t.Fatalf("failed -json line %q: %v", line, err)
				}
				if i > 0 && j.Reason == "card declined" {
					failedAt = append(failedAt, *j.FailedAt)
				}
			}
			if len(failedAt) != 2 || failedAt[0].Before(failedAt[1]) {
				t.Errorf("failed -json lists the card declined group failed at %v; want two, the newest first", failedAt)
			}
			cardOrder := "order-2\norder-1\n"
			if failedAt[0].Equal(failedAt[1]) {
				cardOrder = "order-1\norder-2\n"
			}
			for _, tc := range []struct {
				args []string
				want string
			}{
				{nil, cardOrder + "order-3\n"},
				{[]string{"-reason", "card"}, cardOrder},
				{[]string{"-reason", "timeout:"}, "order-3\n"},
				{[]string{"-reason", "flaky"}, ""},
				{[]string{"-prefix", "order-1"}, "order-1\n"},
				{[]string{"-older", "1h"}, ""},
			} {
				r := idemgate(t, "", append([]string{"failed", "-store", url, "-keys"}, tc.args...)...)
				if r.code != exitOK || r.stdout != tc.want {
					t.Errorf("failed -keys %q = %d, %q, %q; want %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
				}
			}

			// inspect and list show the failures.
			got := inspectJSON(t, url, "order-1", "order-4")
			if j := got["order-1"]; j.Status != "failed" || j.Attempts != 1 || j.Reason != "card declined" || j.FailedAt == nil || j.FirstFailure == nil {
				t.Errorf("inspect -json order-1 = %+v, want failed after 1 attempt for card declined", j)
			}
			if j := got["order-4"]; j.Status != "held" || j.Attempts != 2 || j.Reason != "flaky" || j.FailedAt != nil {
				t.Errorf("inspect -json order-4 = %+v, want held after 2 failed attempts, the last flaky", j)
			}
			r = idemgate(t, "", "inspect", "-store", url, "order-1", "order-4")
			for _, want := range []string{"attempts:   1 failed\n", "reason:     card declined\n", "failed at:  ", "first fail: ",
				"failures:   2 failed attempts so far, last: flaky\n"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("inspect printed\n%s\nwithout %q", r.stdout, want)
				}
			}
			listed, _ := listJSON(t, url, "-state", "failed")
			if want := map[string]string{"order-1": "failed", "order-2": "failed", "order-3": "failed"}; !sameMap(listed, want) {
				t.Errorf("list -state failed = %v, want %v", listed, want)
			}
			r = idemgate(t, "", "list", "-store", url, "-prefix", "order-4")
			if f := strings.Fields(lastRow(r.stdout)); len(f) == 0 || f[len(f)-1] != "2" {
				t.Errorf("list -prefix order-4 = %d:\n%s\nwant its 2 attempts in the last column", r.code, r.stdout)
			}
		})
	}
}

// lastRow is the last line of list's table: the one before its count.
func lastRow(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 {
		return ""
	}
	return lines[len(lines)-3]
}

// settleDead makes each message of the outbox at url dead, with the reason
// reasons gives it in turn.
func settleDead(t *testing.T, url string, reasons ...string) {
	t.Helper()
	o, err := storeurl.OpenExisting(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ob := o.Store.(*sqlstore.Store).Outbox()
	taken, err := ob.Take(t.Context(), 100, time.Minute)
	if err != nil || len(taken) != len(reasons) {
		t.Fatalf("Take = %d messages, %v; want %d", len(taken), err, len(reasons))
	}
	var dead []outbox.Failure
	for i, p := range taken {
		dead = append(dead, outbox.Failure{Pending: p, Reason: reasons[i], Dead: true})
	}
	if err := ob.Settle(t.Context(), nil, dead); err != nil {
		t.Fatal(err)
	}
}

// failed adds the outbox's dead messages as a group of their own, by
// reason; -reason applies to them, -prefix leaves them out.
func TestFailedDeadOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.db")
	msg := outbox.Message{Topic: "shipments", Data: []byte("x")}
	url := enqueueSQLiteAt(t, path, msg, msg, msg)
	settleDead(t, url, "rpc error: code = NotFound", "rpc error: code = NotFound", "rpc error: code = PermissionDenied")

	r := idemgate(t, "", "failed", "-store", url)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "0 failed keys, 0 reasons; outbox: 3 dead messages\n") ||
		!strings.Contains(r.stdout, "outbox:   3 dead messages (the oldest died ") ||
		!strings.Contains(r.stdout, "  2  \"rpc error: code = NotFound\"\n") || !strings.Contains(r.stdout, "idemgate relay -dead lists them") {
		t.Errorf("failed with dead outbox messages = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = idemgate(t, "", "failed", "-store", url, "-reason", "rpc error: code = Perm", "-json")
	var head failedJSON
	if err := json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &head); err != nil || r.code != exitOK {
		t.Fatalf("failed -json = %d, %q, %q: %v", r.code, r.stdout, r.stderr, err)
	}
	if o := head.Outbox; o == nil || o.Dead != 1 || o.Total != 3 || len(o.Reasons) != 1 || o.Reasons[0].Reason != "rpc error: code = PermissionDenied" {
		t.Errorf("failed -reason -json: outbox %+v, want 1 of the 3 dead messages, PermissionDenied", head.Outbox)
	}
	r = idemgate(t, "", "failed", "-store", url, "-prefix", "order-")
	if r.code != exitOK || strings.Contains(r.stdout, "dead message") || !strings.Contains(r.stdout, "outbox:   left out: -prefix") {
		t.Errorf("failed -prefix = %d:\n%s\nwant the outbox left out, and said so", r.code, r.stdout)
	}
}

func TestFailedUsage(t *testing.T) {
	for _, args := range [][]string{
		{"failed", "-store", "sqlite:///nowhere.db", "order-1"},
		{"failed", "-store", "sqlite:///nowhere.db", "-json", "-keys"},
		{"failed", "-store", "sqlite:///nowhere.db", "-older", "-1m"},
	} {
		r := idemgate(t, "", args...)
		if r.code != exitUsage {
			t.Errorf("%q = %d, want %d (usage)", args, r.code, exitUsage)
		}
		r.oneErrorLine(t, "")
	}
}
