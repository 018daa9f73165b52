package main

import (
	"context"
	"testing"
	"time"
)

func TestQueueOrder(t *testing.T) {
	q := newQueue()
	now := time.Now()
	sts := make([]*msgState, 3)
	for i := range sts {
		sts[i] = &msgState{m: &message{seq: i}}
	}
	// Added out of order; all due: they must come out by (due, seq).
	q.add(job{due: now, seq: 2, st: sts[2]})
	q.add(job{due: now.Add(-time.Second), seq: 1, st: sts[1]})
	q.add(job{due: now, seq: 0, st: sts[0]})
	for _, want := range []int{1, 0, 2} {
		j, ok := q.next(t.Context())
		if !ok || j.seq != want {
			t.Fatalf("next = seq %d (ok=%v), want seq %d", j.seq, ok, want)
		}
	}
}

func TestQueueWaitsForDueRetry(t *testing.T) {
	q := newQueue()
	st := &msgState{m: &message{}}
	q.add(job{due: time.Now(), st: st})
	if _, ok := q.next(t.Context()); !ok {
		t.Fatal("first round not handed out")
	}
	due := time.Now().Add(20 * time.Millisecond)
	q.retry(job{due: due, st: st})
	j, ok := q.next(t.Context())
	if !ok || j.st != st {
		t.Fatalf("retry not handed out (ok=%v)", ok)
	}
	if now := time.Now(); now.Before(due) {
		t.Errorf("retry handed out %v before it was due", due.Sub(now))
	}
}

func TestQueueEndsWhenAllSettled(t *testing.T) {
	q := newQueue()
	st := &msgState{m: &message{}}
	q.add(job{due: time.Now(), st: st})
	q.next(t.Context())
	q.retry(job{due: time.Now().Add(time.Hour), st: st})

	// A next blocked on the hour-long retry must return as soon as the
	// message settles another way (here: directly).
	done := make(chan bool)
	go func() {
		_, ok := q.next(t.Context())
		done <- ok
	}()
	q.settle()
	if ok := <-done; ok {
		t.Error("next handed out a round after every message settled")
	}
}

func TestQueueStopsOnCancel(t *testing.T) {
	q := newQueue()
	q.add(job{due: time.Now().Add(time.Hour), st: &msgState{m: &message{}}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan bool)
	go func() {
		_, ok := q.next(ctx)
		done <- ok
	}()
	cancel()
	if ok := <-done; ok {
		t.Error("next handed out a round after its context was cancelled")
	}
}
