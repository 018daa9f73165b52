package main

import (
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPoisonOrdersDeterministic: -poison picks the nearest whole number
// of orders, the same ones for the same seed, others for another seed,
// and leaves the rest of the storm's draws as they were.
func TestPoisonOrdersDeterministic(t *testing.T) {
	c := testConfig("http://h/")
	c.N, c.Poison = 200, 0.05
	a, b, other := poisonOrders(c, 7), poisonOrders(c, 7), poisonOrders(c, 8)
	if len(a) != 10 || !maps.Equal(a, b) {
		t.Fatalf("poisonOrders(seed 7) = %v then %v; want the same 10 orders", slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
	}
	if maps.Equal(a, other) {
		t.Errorf("seeds 7 and 8 chose the same poison orders %v", slices.Sorted(maps.Keys(a)))
	}
	c.Poison = 0
	if got := poisonOrders(c, 7); len(got) != 0 {
		t.Errorf("-poison 0 chose %v", got)
	}
}

// TestSupplierRefusesPoisonUntilFixed: a poison order's requests are
// answered 422 and counted apart until POST /fix; others are accepted.
func TestSupplierRefusesPoisonUntilFixed(t *testing.T) {
	sup := newSupplier(0, 0)
	sup.poison = map[string]bool{"o-000001": true}
	srv := newSupplierServer(t, sup)
	send := func(order string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader(`{"order_id":"`+order+`"}`))
		req.Header.Set("Idempotency-Key", "order_id:"+order)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("o-000001"); got != http.StatusUnprocessableEntity {
		t.Errorf("poison order: status %d, want 422", got)
	}
	if got := send("o-000002"); got != http.StatusOK {
		t.Errorf("normal order: status %d, want 200", got)
	}
	resp, err := http.Post(srv.URL+"/fix", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := send("o-000001"); got != http.StatusOK {
		t.Errorf("poison order after POST /fix: status %d, want 200", got)
	}
	s := getStats(t, srv.URL)
	if s.Poisoned != 1 || s.Accepted != 2 || s.Keys["order_id:o-000001"].Order != "o-000001" {
		t.Errorf("stats: %d poisoned, %d accepted, key's order %q; want 1, 2, o-000001", s.Poisoned, s.Accepted, s.Keys["order_id:o-000001"].Order)
	}
}

// TestAckEachCopy: with -ack-each-copy, a copy nacked while the other was
// acked is redelivered until acked itself, and its time-to-ack includes
// the backoff; without, the other copy's ack settles it.
func TestAckEachCopy(t *testing.T) {
	for _, each := range []bool{false, true} {
		// The second copy of each message to arrive is refused once.
		tg, srv := newTarget(t, func(_ *http.Request, _ received, nth int) int {
			if nth == 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		c := testConfig(srv.URL)
		c.N, c.Concurrent, c.AckEachCopy = 5, 1, each
		c.BackoffMin, c.BackoffMax = 50*time.Millisecond, 50*time.Millisecond
		res := runStorm(t, t.Context(), c)
		wantDeliveries, wantChains := 2, 0
		if each {
			wantDeliveries, wantChains = 3, 1
		}
		for id, ds := range tg.deliveries() {
			if len(ds) != wantDeliveries {
				t.Errorf("-ack-each-copy=%v: message %s delivered %d times, want %d", each, id, len(ds), wantDeliveries)
			}
		}
		if len(res.chains) != wantChains*c.N || len(res.tally.copyAcks) != 2*c.N {
			t.Errorf("-ack-each-copy=%v: %d copies redelivered on their own, %d copies acked; want %d and %d",
				each, len(res.chains), len(res.tally.copyAcks), wantChains*c.N, 2*c.N)
		}
		if slow := percentile(res.tally.copyAcks, 1); each != (slow >= c.BackoffMin) {
			t.Errorf("-ack-each-copy=%v: slowest copy acked after %v; the backoff (%v) counts only when each copy is acked", each, slow, c.BackoffMin)
		}
	}
}

// TestDeadLettersReplay: what -dead-letters writes, -replay-dead
// delivers again, with the same messageIds, data and attributes.
func TestDeadLettersReplay(t *testing.T) {
	_, refuse := newTarget(t, answerAlways(http.StatusUnprocessableEntity))
	c := testConfig(refuse.URL)
	c.N, c.MaxAttempts = 3, 2
	first := runStorm(t, t.Context(), c)
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	if err := writeDeadLetters(path, first); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); strings.Count(string(b), "\n") != c.N {
		t.Fatalf("dead letters file:\n%s\nwant %d lines", b, c.N)
	}
	tg, accept := newTarget(t, answerAlways(http.StatusOK))
	c.URL, c.ReplayDead = accept.URL, path
	again := runStorm(t, t.Context(), c)
	if ack, _, _ := finals(again); ack != c.N {
		t.Errorf("replay acked %d of %d", ack, c.N)
	}
	for i, st := range again.msgs {
		m, was := st.m, first.msgs[i].m
		if m.id != was.id || string(m.data) != string(was.data) || !maps.Equal(m.attrs, was.attrs) {
			t.Errorf("replayed message %d = %s %s %v; want %s %s %v", i, m.id, m.data, m.attrs, was.id, was.data, was.attrs)
		}
	}
	if got := len(tg.deliveries()); got != c.N {
		t.Errorf("replay reached the endpoint as %d messages, want %d", got, c.N)
	}
}
