package main

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// job is one delivery round waiting for its time: the next attempt of a
// message, due at due (now for first deliveries, later after a backoff).
type job struct {
	due time.Time
	seq int // tie-break, keeps first deliveries in publish order
	st  *msgState
}

// queue holds the rounds still to send, ordered by due time, and counts the
// messages that have not settled yet (acked or dead-lettered). It is safe for
// concurrent use.
type queue struct {
	mu   sync.Mutex
	jobs jobHeap // guarded by mu
	open int     // messages not yet settled; guarded by mu

	wake chan struct{} // capacity 1; poked by push and settle
}

func newQueue() *queue {
	return &queue{wake: make(chan struct{}, 1)}
}

// add registers a new message and schedules its first round.
func (q *queue) add(j job) {
	q.mu.Lock()
	q.open++
	heap.Push(&q.jobs, j)
	q.mu.Unlock()
	q.poke()
}

// retry schedules another round of a message that is still open.
func (q *queue) retry(j job) {
	q.mu.Lock()
	heap.Push(&q.jobs, j)
	q.mu.Unlock()
	q.poke()
}

// settle records that a message reached its final state.
func (q *queue) settle() {
	q.mu.Lock()
	q.open--
	q.mu.Unlock()
	q.poke()
}

func (q *queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next blocks until a round is due and returns it. It returns false once
// every message has settled, or when ctx is done.
func (q *queue) next(ctx context.Context) (job, bool) {
	for {
		q.mu.Lock()
		if q.open == 0 {
			q.mu.Unlock()
			return job{}, false
		}
		var wait time.Duration = -1 // no round scheduled: wait for a poke
		if len(q.jobs) > 0 {
			if wait = time.Until(q.jobs[0].due); wait <= 0 {
				j := heap.Pop(&q.jobs).(job)
				q.mu.Unlock()
				return j, true
			}
		}
		q.mu.Unlock()

		var timer *time.Timer
		var fire <-chan time.Time
		if wait > 0 {
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-q.wake:
		case <-fire:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return job{}, false
		}
	}
}

// jobHeap is a min-heap on (due, seq) for container/heap.
type jobHeap []job

func (h jobHeap) Len() int { return len(h) }
func (h jobHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h jobHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)   { *h = append(*h, x.(job)) }
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = job{}
	*h = old[:len(old)-1]
	return j
}
