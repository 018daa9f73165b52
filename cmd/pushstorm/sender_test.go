package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

func runStorm(t testing.TB, ctx context.Context, c config) *runResult {
	t.Helper()
	res, err := storm(ctx, c, 1)
	if err != nil {
		t.Fatalf("storm: %v", err)
	}
	return res
}

func finals(res *runResult) (ack, dead, lost int) {
	for _, st := range res.msgs {
		switch st.final {
		case acked:
			ack++
		case deadLettered:
			dead++
		default:
			lost++
		}
	}
	return ack, dead, lost
}

func attemptsOf(ds []received) []int {
	var out []int
	for _, d := range ds {
		out = append(out, d.attempt)
	}
	slices.Sort(out)
	return out
}

func TestStormHappyPath(t *testing.T) {
	for _, form := range []string{formWrapped, formUnwrapped} {
		t.Run(form, func(t *testing.T) {
			tg, srv := newTarget(t, answerAlways(http.StatusOK))
			c := testConfig(srv.URL)
			c.Form = form
			res := runStorm(t, t.Context(), c)
			if ack, dead, lost := finals(res); ack != c.N || dead+lost != 0 {
				t.Errorf("acked %d, dead-lettered %d, lost %d of %d; want all acked", ack, dead, lost, c.N)
			}
			got := tg.deliveries()
			if len(got) != c.N {
				t.Errorf("endpoint saw %d messageIds, want %d", len(got), c.N)
			}
			for id, ds := range got {
				if len(ds) != 1 {
					t.Errorf("message %s delivered %d times without chaos, want once", id, len(ds))
				}
			}
			if res.tally.deliveries != c.N || res.tally.acks != c.N {
				t.Errorf("tally: %d deliveries, %d acks; want %d of each", res.tally.deliveries, res.tally.acks, c.N)
			}
		})
	}
}

func TestStormRedeliversAfterNack(t *testing.T) {
	// The first two deliveries of each message fail; the third is acked.
	tg, srv := newTarget(t, func(_ *http.Request, _ received, nth int) int {
		if nth <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	c := testConfig(srv.URL)
	res := runStorm(t, t.Context(), c)
	if ack, dead, lost := finals(res); ack != c.N || dead+lost != 0 {
		t.Errorf("acked %d, dead-lettered %d, lost %d; a nack must lead to redelivery until acked", ack, dead, lost)
	}
	for id, ds := range tg.deliveries() {
		if got, want := attemptsOf(ds), []int{1, 2, 3}; !slices.Equal(got, want) {
			t.Errorf("message %s deliveryAttempts = %v, want %v", id, got, want)
		}
	}
	if got, want := res.tally.nacks.Server, 2*c.N; got != want {
		t.Errorf("5xx nacks = %d, want %d", got, want)
	}
}

func TestStormDeadLetters(t *testing.T) {
	tg, srv := newTarget(t, answerAlways(http.StatusServiceUnavailable))
	c := testConfig(srv.URL)
	c.MaxAttempts = 3
	res := runStorm(t, t.Context(), c)
	if ack, dead, lost := finals(res); dead != c.N || ack+lost != 0 {
		t.Errorf("acked %d, dead-lettered %d, lost %d; want every message dead-lettered", ack, dead, lost)
	}
	for id, ds := range tg.deliveries() {
		if got, want := attemptsOf(ds), []int{1, 2, 3}; !slices.Equal(got, want) {
			t.Errorf("message %s deliveryAttempts = %v, want exactly -max-attempts deliveries %v", id, got, want)
		}
	}
	if got := res.tally.nacks.Unavailable; got != 3*c.N {
		t.Errorf("503 nacks = %d, want %d", got, 3*c.N)
	}
	rep := newReport(c, 1, res, nil)
	if rep.OK || len(rep.DeadLettered) != c.N {
		t.Errorf("report ok=%v with %d dead letters; a dead letter must fail the run", rep.OK, len(rep.DeadLettered))
	}
}

func TestStormTransportDuplicates(t *testing.T) {
	tg, srv := newTarget(t, answerAlways(http.StatusOK))
	c := testConfig(srv.URL)
	c.Dup = 1
	res := runStorm(t, t.Context(), c)
	for id, ds := range tg.deliveries() {
		if got, want := attemptsOf(ds), []int{1, 2}; !slices.Equal(got, want) {
			t.Errorf("message %s deliveryAttempts = %v, want %v: acked, then delivered again", id, got, want)
		}
	}
	if got := res.tally.duplicates; got != c.N {
		t.Errorf("duplicates = %d, want %d", got, c.N)
	}
	if ack, _, _ := finals(res); ack != c.N {
		t.Errorf("acked %d of %d", ack, c.N)
	}
}

func TestStormConcurrentCopies(t *testing.T) {
	for _, concurrency := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("concurrency=%d", concurrency), func(t *testing.T) {
			// A barrier per messageId: the first copy is answered only once
			// the second has arrived, so both must be in flight together.
			var mu sync.Mutex
			barriers := map[string]chan struct{}{}
			tg, srv := newTarget(t, func(r *http.Request, d received, nth int) int {
				mu.Lock()
				b, ok := barriers[d.id]
				if !ok {
					b = make(chan struct{})
					barriers[d.id] = b
				}
				mu.Unlock()
				if ok {
					close(b)
					return http.StatusOK
				}
				select {
				case <-b:
					return http.StatusOK
				case <-r.Context().Done():
					return http.StatusInternalServerError
				}
			})
			c := testConfig(srv.URL)
			c.Concurrency = concurrency
			c.Concurrent = 1
			c.MaxAttempts = 1 // a copy left alone at the barrier times out and dead-letters
			c.Timeout = 10 * time.Second
			res := runStorm(t, t.Context(), c)
			for id, ds := range tg.deliveries() {
				if got, want := attemptsOf(ds), []int{1, 1}; !slices.Equal(got, want) {
					t.Errorf("message %s deliveryAttempts = %v, want two copies of attempt 1", id, got)
				}
			}
			if ack, dead, lost := finals(res); ack != c.N {
				t.Errorf("acked %d, dead-lettered %d, lost %d; the copies did not meet", ack, dead, lost)
			}
			if got := res.tally.extraCopy; got != c.N {
				t.Errorf("concurrent copies = %d, want %d", got, c.N)
			}
		})
	}
}

func TestStormConcurrentCopiesOneAckIsEnough(t *testing.T) {
	// Per message, whichever copy arrives second fails; the message is acked.
	_, srv := newTarget(t, func(_ *http.Request, _ received, nth int) int {
		if nth == 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	c := testConfig(srv.URL)
	c.Concurrent = 1
	c.MaxAttempts = 1
	res := runStorm(t, t.Context(), c)
	if ack, dead, _ := finals(res); ack != c.N || dead != 0 {
		t.Errorf("acked %d, dead-lettered %d; an ack of either copy must ack the message", ack, dead)
	}
}

func TestStormRepublishes(t *testing.T) {
	tg, srv := newTarget(t, answerAlways(http.StatusOK))
	c := testConfig(srv.URL)
	c.Republish = 1
	runStorm(t, t.Context(), c)
	ids := map[string][]string{} // order_id → messageIds
	for id, ds := range tg.deliveries() {
		ids[ds[0].orderID] = append(ids[ds[0].orderID], id)
	}
	if len(ids) != c.N {
		t.Errorf("endpoint saw %d orders, want %d", len(ids), c.N)
	}
	for order, msgIDs := range ids {
		if len(msgIDs) != 2 {
			t.Errorf("order %s arrived under messageIds %v, want two (original and republish)", order, msgIDs)
		}
	}
}

func TestStormTimeoutIsNack(t *testing.T) {
	// Attempt 1 never answers; later attempts answer at once (on a busy
	// machine one may still miss the deadline, hence "at least").
	tg, srv := newTarget(t, func(r *http.Request, d received, _ int) int {
		if d.attempt == 1 {
			<-r.Context().Done() // the client gave up and closed the connection
		}
		return http.StatusOK
	})
	c := testConfig(srv.URL)
	c.N = 5
	c.Timeout = 250 * time.Millisecond
	res := runStorm(t, t.Context(), c)
	if got := res.tally.nacks.Timeout; got < c.N {
		t.Errorf("timeout nacks = %d, want at least %d", got, c.N)
	}
	for id, ds := range tg.deliveries() {
		got := attemptsOf(ds)
		if len(got) < 2 || got[0] != 1 || got[len(got)-1] != len(got) {
			t.Errorf("message %s deliveryAttempts = %v, want 1, 2, …: a timeout must be redelivered", id, got)
		}
	}
	if ack, _, _ := finals(res); ack != c.N {
		t.Errorf("acked %d of %d", ack, c.N)
	}
}

func TestStormDoesNotFollowRedirects(t *testing.T) {
	tg, srv := newTarget(t, func(*http.Request, received, int) int { return http.StatusFound })
	c := testConfig(srv.URL)
	c.N, c.MaxAttempts = 2, 2
	res := runStorm(t, t.Context(), c)
	if got := res.tally.nacks.Other; got != 4 {
		t.Errorf("other nacks = %d, want 4: a 302 is a nack", got)
	}
	if n := len(tg.deliveries()); n != 2 {
		t.Errorf("endpoint saw %d messages, want 2", n)
	}
}

func TestStormNetworkErrorIsNack(t *testing.T) {
	_, srv := newTarget(t, answerAlways(http.StatusOK))
	srv.Close() // nothing listens any more
	c := testConfig(srv.URL)
	c.N, c.MaxAttempts = 3, 2
	res := runStorm(t, t.Context(), c)
	if got := res.tally.nacks.Error; got != 6 {
		t.Errorf("error nacks = %d, want 6", got)
	}
	if _, dead, _ := finals(res); dead != 3 {
		t.Errorf("dead-lettered %d, want 3", dead)
	}
}

func TestStormInterrupted(t *testing.T) {
	// Every delivery fails and the backoff is long, so all messages wait.
	c := testConfig("")
	c.BackoffMin, c.BackoffMax = time.Hour, time.Hour
	nacked := make(chan struct{}, c.N)
	_, srv := newTarget(t, func(*http.Request, received, int) int {
		nacked <- struct{}{}
		return http.StatusInternalServerError
	})
	c.URL = srv.URL
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for range c.N {
			<-nacked
		}
		cancel()
	}()
	res := runStorm(t, ctx, c)
	if ack, dead, lost := finals(res); lost != c.N || ack+dead != 0 {
		t.Errorf("acked %d, dead-lettered %d, lost %d; want all %d reported lost", ack, dead, lost, c.N)
	}
	rep := newReport(c, 1, res, nil)
	if !rep.Interrupted || rep.OK {
		t.Errorf("report interrupted=%v ok=%v, want true, false", rep.Interrupted, rep.OK)
	}
}

func TestBackoff(t *testing.T) {
	c := config{BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second}
	for attempt, want := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 60: time.Second,
	} {
		if got := backoff(c, attempt); got != want {
			t.Errorf("backoff after attempt %d = %v, want %v", attempt, got, want)
		}
	}
	if got := backoff(config{}, 3); got != 0 {
		t.Errorf("zero backoff config gives %v, want 0", got)
	}
}

func TestIsAck(t *testing.T) {
	for _, code := range []int{102, 200, 201, 202, 204} {
		if !isAck(code) {
			t.Errorf("%d must ack, as on Pub/Sub push", code)
		}
	}
	for _, code := range []int{100, 203, 205, 206, 301, 304, 400, 404, 409, 429, 500, 503} {
		if isAck(code) {
			t.Errorf("%d must nack", code)
		}
	}
}
