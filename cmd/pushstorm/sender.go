package main

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Final states of a message.
const (
	pending      = iota // neither acked nor dead-lettered: lost, if the run ended
	acked               // an endpoint acked it and no redelivery is pending
	deadLettered        // -max-attempts deliveries, the last one nacked
)

// msgState is the delivery progress of one message. Rounds of one message
// never overlap, and the queue hands a message from one round to the next
// under its mutex, so the fields need no lock of their own.
type msgState struct {
	m        *message
	attempts int  // deliveryAttempt of the latest round
	ackLost  bool // the injected lost ack has happened
	final    int  // pending, acked or deadLettered

	// The time-to-ack of concurrent copies (see copyTimes): copySent is
	// when the copies went out; copiesWaiting counts the copies of a
	// round that no copy acked, settled by the message's later ack.
	copySent      time.Time
	copiesWaiting int
	// chain marks the state of a copy redelivered on its own after a
	// nack (-ack-each-copy), not of a published message.
	chain bool
}

// isAck reports whether Pub/Sub push treats status as an ack. The Pub/Sub
// emulator differs: it nacks 202 and acks 203.
func isAck(status int) bool {
	switch status {
	case http.StatusProcessing, http.StatusOK, http.StatusCreated, http.StatusAccepted, http.StatusNoContent:
		return true
	}
	return false
}

// outcome is what one HTTP delivery came back with.
type outcome struct {
	status  int // 0 when there was no response
	timeout bool
	err     error
	latency time.Duration
}

func (o outcome) ack() bool { return o.err == nil && isAck(o.status) }

// sender pushes messages to one endpoint the way a push subscription does.
type sender struct {
	cfg    config
	client *http.Client
	queue  *queue
	tally  *tally
	class  map[string]string // order_id → its class (classOf); read-only

	mu     sync.Mutex
	chains []*msgState // copies redelivered on their own; guarded by mu
}

// runResult is what a storm did.
type runResult struct {
	msgs        []*msgState
	chains      []*msgState // -ack-each-copy: the copies redelivered on their own
	class       map[string]string
	poison      map[string]bool // the poison order_ids
	tally       *tally
	elapsed     time.Duration
	interrupted bool
}

// storm publishes the messages of cfg (chaos drawn from seed) and delivers
// them until each is acked or dead-lettered, or ctx is done. An error means
// the run could not start; delivery failures are in the result.
func storm(ctx context.Context, cfg config, seed int64) (*runResult, error) {
	start := time.Now()
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>32|1))
	var msgs []*message
	var err error
	if cfg.ReplayDead != "" {
		msgs, err = replayMessages(cfg, rng)
	} else {
		msgs, err = buildMessages(cfg, rng, start)
	}
	if err != nil {
		return nil, err
	}
	poison := poisonOrders(cfg, seed)
	transport := newTransport(cfg.Concurrency)
	defer transport.CloseIdleConnections()
	s := &sender{
		cfg: cfg,
		client: &http.Client{
			Transport: transport,
			// Pub/Sub does not follow redirects; a 3xx is a nack.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		queue: newQueue(),
		tally: newTally(),
		class: classes(msgs, poison),
	}
	res := &runResult{msgs: make([]*msgState, len(msgs)), tally: s.tally, class: s.class, poison: poison}
	for i, m := range msgs {
		res.msgs[i] = &msgState{m: m}
		s.queue.add(job{due: start, seq: m.seq, st: res.msgs[i]})
	}
	s.dispatch(ctx)
	res.chains = s.chains // every round has returned
	res.elapsed = time.Since(start)
	res.interrupted = ctx.Err() != nil
	return res, nil
}

// newTransport keeps enough idle connections for every in-flight delivery,
// two per round when a message goes out as concurrent copies.
func newTransport(concurrency int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2*concurrency + 2
	t.MaxIdleConnsPerHost = t.MaxIdleConns
	return t
}

// dispatch runs due rounds, at most cfg.Concurrency requests at a time, and
// returns when all messages settled or ctx is done and the rounds in flight
// finished.
func (s *sender) dispatch(ctx context.Context) {
	slots := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		j, ok := s.queue.next(ctx)
		if !ok {
			return
		}
		copies := 1
		if j.st.attempts == 0 && j.st.m.concurrentFirst {
			copies = 2
		}
		// Take a slot per copy; with -concurrency 1 a pair shares one.
		taken := 0
		for ; taken < min(copies, s.cfg.Concurrency); taken++ {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				for range taken {
					<-slots
				}
				return
			}
		}
		wg.Go(func() {
			defer func() {
				for range taken {
					<-slots
				}
			}()
			s.round(ctx, j.st, copies)
		})
	}
}

// round sends the next delivery attempt of st (copies at once) and decides
// what happens to the message: settle it, or schedule another round.
func (s *sender) round(ctx context.Context, st *msgState, copies int) {
	st.attempts++
	attempt := st.attempts
	sent := time.Now()
	results := make([]outcome, copies)
	var wg sync.WaitGroup
	for i := 1; i < copies; i++ {
		wg.Go(func() { results[i] = s.deliver(ctx, st.m, attempt) })
	}
	results[0] = s.deliver(ctx, st.m, attempt)
	wg.Wait()
	if copies > 1 {
		s.tally.concurrentRound(copies - 1)
	}

	// Any copy's ack acks the message.
	ackedNow := false
	for _, o := range results {
		s.tally.record(o, attempt, s.class[st.m.orderID])
		ackedNow = ackedNow || o.ack()
	}
	if copies > 1 {
		s.copiesAnswered(st, attempt, sent, results)
	}
	if ackedNow && (st.chain || st.copiesWaiting > 0) {
		for range max(st.copiesWaiting, 1) {
			s.tally.copyAcked(time.Since(st.copySent))
		}
		st.copiesWaiting = 0
	}
	switch {
	case ackedNow && st.m.dupAfterAck && !st.ackLost && ctx.Err() == nil:
		// The ack is lost on the way back, so Pub/Sub delivers again.
		st.ackLost = true
		s.tally.duplicate()
		s.queue.retry(job{due: time.Now(), seq: st.m.seq, st: st})
	case ackedNow:
		st.final = acked
		s.queue.settle()
	case ctx.Err() != nil:
		// Interrupted: the message stays pending and is reported lost.
	case s.cfg.MaxAttempts > 0 && attempt >= s.cfg.MaxAttempts:
		st.final = deadLettered
		if st.chain || st.copiesWaiting > 0 {
			s.tally.copiesDeadLettered(max(st.copiesWaiting, 1))
		}
		s.queue.settle()
	default:
		s.queue.retry(job{due: time.Now().Add(backoff(s.cfg, attempt)), seq: st.m.seq, st: st})
	}
}

// copiesAnswered settles the copies of st's concurrent round (sent at
// sent) for their time-to-ack: a copy acked by its own answer took its
// latency. A copy nacked while another copy acked is settled by that ack
// (its latency), or, with -ack-each-copy, redelivered on its own after the
// backoff and settled by its own later ack. When no copy acked, every copy
// waits for the message's redelivery, which is one delivery again.
func (s *sender) copiesAnswered(st *msgState, attempt int, sent time.Time, results []outcome) {
	first := time.Duration(-1) // the latency of the earliest ack
	for _, o := range results {
		if o.ack() {
			s.tally.copyAcked(o.latency)
			if first < 0 || o.latency < first {
				first = o.latency
			}
		}
	}
	if first < 0 {
		st.copySent, st.copiesWaiting = sent, len(results)
		return
	}
	for _, o := range results {
		switch {
		case o.ack():
		case !s.cfg.AckEachCopy:
			s.tally.copyAcked(first)
		default:
			c := &msgState{m: st.m, attempts: attempt, ackLost: true, chain: true, copySent: sent}
			s.mu.Lock()
			s.chains = append(s.chains, c)
			s.mu.Unlock()
			s.queue.add(job{due: time.Now().Add(backoff(s.cfg, attempt)), seq: st.m.seq, st: c})
		}
	}
}

// backoff is the delay before the redelivery that follows nacked attempt
// number attempt: -backoff-min doubled per attempt, capped at -backoff-max.
func backoff(c config, attempt int) time.Duration {
	d := c.BackoffMin
	for i := 1; i < attempt && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// deliver makes one HTTP delivery and classifies its answer. It reads the
// response body to the end (within a limit) so the connection is reused.
func (s *sender) deliver(ctx context.Context, m *message, attempt int) outcome {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	begin := time.Now()
	req, err := newRequest(ctx, s.cfg, m, attempt)
	if err != nil {
		return outcome{err: err}
	}
	resp, err := s.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = nil // the status is in; a broken body does not change it
		}
	}
	o := outcome{latency: time.Since(begin), err: err}
	if resp != nil {
		o.status = resp.StatusCode
	}
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		o.timeout = true
	}
	return o
}
