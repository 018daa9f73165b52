package relay

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/idemgate/idemgate/outbox"
)

// publishTimeout is the client's bound on one publish, retries included
// (PublishSettings.Timeout): three quarters of the lease, so that every
// answer comes before it lapses (docs/design.md, "The relay's rounds").
func (r *Relay) publishTimeout() time.Duration { return r.opts.Lease * 3 / 4 }

// lateTake is how long after the start of its Take a batch may still be
// published; a later one is given back untried.
func (r *Relay) lateTake() time.Duration { return r.opts.Lease / 8 }

// publishers are one Run's publishers, by full topic name, so that a
// topic's two spellings share one and their ordering keys are ordered as one.
type publishers struct {
	r *Relay
	// byName and alone hold a topic's publishers, alone's sending each
	// message in a request of its own; used by Run's goroutine only.
	byName, alone map[string]*pubsub.Publisher
	// flushing counts the Flush calls in flight, which stop waits for:
	// Publisher.Flush reads the publisher's state unsynchronised.
	flushing sync.WaitGroup
	late     sync.WaitGroup // the goroutines of awaitLate
}

func (r *Relay) newPublishers() *publishers {
	return &publishers{r: r, byName: make(map[string]*pubsub.Publisher), alone: make(map[string]*pubsub.Publisher)}
}

// fullName returns topic's full name, an ID resolved in the client's project.
func (ps *publishers) fullName(topic string) string {
	if strings.Count(topic, "/") == 3 {
		return topic
	}
	return "projects/" + ps.r.pub.Project() + "/topics/" + topic
}

// get returns the publishers of the full topic name name: the one of
// rounds, and the one that sends each message alone.
func (ps *publishers) get(name string) (round, alone *pubsub.Publisher) {
	if p, ok := ps.byName[name]; ok {
		return p, ps.alone[name]
	}
	round = ps.r.newPublisher(name, min(ps.r.opts.BatchSize, pubsub.MaxPublishRequestCount))
	alone = ps.r.newPublisher(name, 1)
	ps.byName[name], ps.alone[name] = round, alone
	return round, alone
}

// newPublisher returns a publisher of the full topic name name that sends
// up to count messages in one request.
func (r *Relay) newPublisher(name string, count int) *pubsub.Publisher {
	p := r.pub.Publisher(name)
	p.EnableMessageOrdering = true
	s := &p.PublishSettings
	s.Timeout = r.publishTimeout()
	// A round's messages of one ordering key go in one request: the
	// relay flushes each round at once, caps a key's share below the
	// thresholds (publish), and gives every request a worker (workers).
	s.DelayThreshold = r.opts.Lease
	s.CountThreshold = count
	s.ByteThreshold = pubsub.MaxPublishRequestBytes
	s.NumGoroutines = r.workers()
	return p
}

// workers is the NumGoroutines of the relay's publishers: one for every
// request the relay can have in flight, so that none queues for a worker
// past its lease.
func (r *Relay) workers() int { return r.opts.BatchSize * (int(r.opts.Lease/r.straggle()) + 2) }

// requestLimit is the most message bytes (outbox.PublishSize) the client
// puts in one request to the full topic name name.
func requestLimit(name string) int {
	return pubsub.MaxPublishRequestBytes - (1 + protowire.SizeVarint(uint64(len(name))) + len(name)) - 5
}

// flush sends what the publishers in used hold, without waiting.
func (ps *publishers) flush(used map[*pubsub.Publisher]bool) {
	for p := range used {
		ps.flushing.Go(p.Flush)
	}
}

// stop stops every publisher, waiting for the publishes in flight (the
// client ends them at its Timeout).
func (ps *publishers) stop() {
	ps.flushing.Wait()
	for name, p := range ps.byName {
		p.Stop()
		ps.alone[name].Stop()
	}
}

// An outcome is what became of one publish.
type outcome int

const (
	acked     outcome = iota // published
	refused                  // not published: Pub/Sub or the client turned it down
	permanent                // refused, and would be on every attempt
	untried                  // never sent
	unknown                  // may have been published, or may still be
)

// classify tells what err, the result of one publish, says of it: a
// refusal only when it proves the message was not published and will not
// be (the table is in docs/design.md, "The relay's rounds").
func classify(err error) outcome {
	var paused pubsub.ErrPublishingPaused
	switch {
	case err == nil:
		return acked
	case errors.Is(err, pubsub.ErrOversizedMessage):
		return permanent
	case errors.As(err, &paused), errors.Is(err, pubsub.ErrPublisherStopped):
		return untried
	}
	st, ok := status.FromError(err)
	if !ok {
		return unknown
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.ResourceExhausted, codes.OutOfRange, codes.Unimplemented:
		return refused
	case codes.Internal:
		if strings.Contains(st.Message(), "invalid UTF-8") {
			return permanent
		}
	}
	return unknown
}

// An orderKey is a topic's full name and an ordering key ("" for none).
type orderKey struct{ name, orderingKey string }

// group is what a round sends to one orderKey.
type group struct {
	n, bytes int
	full     bool // the rest of the key's messages wait for the next round
}

// An inflight is one message of a round: its full topic name, its
// publishers, the client's result (nil: untried) and its group (nil: it
// went alone).
type inflight struct {
	p          outbox.Pending
	name       string
	pub, alone *pubsub.Publisher
	res        *pubsub.PublishResult
	g          *group
}

// straggle is how long a round waits for its answers before it leaves
// those outstanding (stragglers) to wait on their own, held, and goes on.
func (r *Relay) straggle() time.Duration { return min(time.Second, r.opts.Lease/16) }

// publish publishes batch, whose Take ran from taken to returned, and
// sorts it: acknowledged (sent), not published (failed, each with the
// relay's decision), maybe published (unknown: held until their lease
// lapses), and the stragglers. It waits up to a straggle, or until giveUp
// closes (the unanswered are then unknown), and calls flushed once the
// publishes are sent.
func (r *Relay) publish(ctx context.Context, pubs *publishers, batch []outbox.Pending, taken, returned time.Time, giveUp <-chan struct{}, flushed func()) (sent []outbox.Pending, failed []outbox.Failure, unknown int, late []inflight) {
	// Each ordering key's share of the round in one request; a suspect
	// alone, and of its key only the first message.
	msgs := make([]inflight, len(batch))
	groups := make(map[orderKey]*group)
	used := make(map[*pubsub.Publisher]bool)
	suspect := r.suspects.take(batch)
	var suspectKey map[orderKey]bool // nil, read as empty, in a round without suspects
	for _, p := range batch {
		if suspect[p.ID] && p.OrderingKey != "" {
			if suspectKey == nil {
				suspectKey = make(map[orderKey]bool)
			}
			suspectKey[orderKey{pubs.fullName(p.Topic), p.OrderingKey}] = true
		}
	}
	for i, p := range batch {
		m := &msgs[i]
		m.p, m.name = p, pubs.fullName(p.Topic)
		m.pub, m.alone = pubs.get(m.name)
		k := orderKey{m.name, p.OrderingKey}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		if suspectKey[k] || suspect[p.ID] {
			if g.full {
				continue // untried, behind the first of its key
			}
			g.full = p.OrderingKey != ""
			m.pub = m.alone
			m.res = m.alone.Publish(ctx, pubsubMessage(p))
			used[m.alone] = true
			continue
		}
		if p.OrderingKey != "" {
			size := outbox.PublishSize(p.Message)
			if g.full || g.n > 0 && (g.n == m.pub.PublishSettings.CountThreshold || g.bytes+size > requestLimit(m.name)) {
				g.full = true
				continue // untried
			}
			g.bytes += size
		}
		g.n++
		m.g = g
		m.res = m.pub.Publish(ctx, pubsubMessage(p))
		used[m.pub] = true
	}
	pubs.flush(used)
	flushed()

	straggled := make(chan struct{})
	t := time.AfterFunc(r.straggle(), func() { close(straggled) })
	defer t.Stop()
	return r.answers(ctx, msgs, taken, returned, giveUp, straggled)
}

// pubsubMessage is the message the client publishes for p.
func pubsubMessage(p outbox.Pending) *pubsub.Message {
	return &pubsub.Message{Data: p.Data, Attributes: p.Attributes, OrderingKey: p.OrderingKey}
}

// answers waits for the answers to msgs (a round's publishes, or its
// stragglers) until all came, straggled closes (nil never does) or giveUp
// closes, and sorts them as publish does. A refused message that shared
// its request is published again alone (sendAlone) and waited for in turn.
func (r *Relay) answers(ctx context.Context, msgs []inflight, taken, returned time.Time, giveUp, straggled <-chan struct{}) (sent []outbox.Pending, failed []outbox.Failure, unknown int, late []inflight) {
	var back []outbox.Failure
	for len(msgs) > 0 {
		gaveUp, straggling := false, false
		for _, m := range msgs {
			if m.res == nil || gaveUp || straggling {
				continue
			}
			select {
			case <-m.res.Ready():
			case <-giveUp:
				gaveUp = true
			case <-straggled:
				straggling = true
			}
		}
		ready := msgs
		if straggling && !gaveUp {
			ready = nil
			for _, m := range msgs {
				switch {
				case m.res == nil || isReady(m.res):
					ready = append(ready, m)
				default:
					late = append(late, m)
				}
			}
		}
		s, f, u, shared := r.sortOut(ctx, ready, returned, !gaveUp)
		sent, failed, unknown = append(sent, s...), append(failed, f...), unknown+u
		var b []outbox.Failure
		msgs, b = r.sendAlone(ctx, shared, taken, gaveUp)
		back = append(back, b...)
	}
	r.checkLease(ctx, taken)
	return sent, append(failed, back...), unknown, late
}

// sendAlone publishes msgs, refused in a request they shared, again
// each alone: the unordered ones and the first of each key; the later
// ones of a key go back untried. When it is too late in the lease of their
// Take (started at taken) or Run is stopping, all go back untried, as
// suspects, which the next round publishes alone.
func (r *Relay) sendAlone(ctx context.Context, msgs []inflight, taken time.Time, stopping bool) (sending []inflight, back []outbox.Failure) {
	if len(msgs) == 0 {
		return nil, nil
	}
	late := stopping || time.Since(taken) > r.lateTake()
	if late {
		r.suspects.mark(msgs)
	}
	first := make(map[orderKey]bool)
	for _, m := range msgs {
		k := orderKey{m.name, m.p.OrderingKey}
		if late || k.orderingKey != "" && first[k] {
			back = append(back, outbox.Failure{Pending: m.p})
			continue
		}
		first[k] = true
		m.pub, m.g = m.alone, nil
		m.res = m.alone.Publish(ctx, pubsubMessage(m.p))
		sending = append(sending, m)
	}
	return sending, back
}

// isReady reports whether res has its answer.
func isReady(res *pubsub.PublishResult) bool {
	select {
	case <-res.Ready():
		return true
	default:
		return false
	}
}

// checkLease counts and logs a round taken at taken that outlived its lease.
func (r *Relay) checkLease(ctx context.Context, taken time.Time) {
	if d := time.Since(taken); d > r.opts.Lease {
		r.tel.failed(ctx, opLease)
		r.logFailure(ctx, slog.LevelError, failureKind{op: opLease, code: "outlived"}, "relay: publishing outlived the lease; another relay may have published the same messages again",
			"took", d, "lease", r.opts.Lease)
	}
}

// awaitLate waits for the answers of a round's stragglers (or for giveUp),
// then sorts and settles them as the round would have.
func (r *Relay) awaitLate(ctx context.Context, late []inflight, taken, returned time.Time, giveUp <-chan struct{}) {
	sent, failed, _, _ := r.answers(ctx, late, taken, returned, giveUp, nil)
	if len(sent) > 0 || len(failed) > 0 {
		r.settle(ctx, sent, failed) // logs and counts its failure
	}
}

// sortOut sorts msgs by their answers, as publish does; one not yet
// answered is unknown. A refused message that shared its request is not
// counted but returned in shared, to be published alone. With resume,
// every answer has come, and the keys the client paused are resumed.
func (r *Relay) sortOut(ctx context.Context, msgs []inflight, returned time.Time, resume bool) (sent []outbox.Pending, failed []outbox.Failure, unknown int, shared []inflight) {
	paused := make(map[orderKey]*pubsub.Publisher)
	var lines roundLines
	defer r.logRound(ctx, &lines)
	for _, m := range msgs {
		p := m.p
		if m.res == nil {
			failed = append(failed, outbox.Failure{Pending: p})
			continue
		}
		var err error
		select {
		case <-m.res.Ready():
			_, err = m.res.Get(ctx)
		default:
			unknown++
			r.tel.failed(ctx, opUnknown)
			lines.add(failureKind{op: opUnknown, topic: m.name, code: "stopping"}, slog.LevelWarn, "relay: stopping before Pub/Sub answered a publish; the message stays held until its lease lapses, then is published again",
				"topic", p.Topic, "child_key", p.ChildKey)
			continue
		}
		if err != nil && p.OrderingKey != "" {
			paused[orderKey{m.name, p.OrderingKey}] = m.pub
		}
		switch o := classify(err); o {
		case acked:
			sent = append(sent, p)
			r.tel.published(ctx, p.Waited+time.Since(returned))
			r.recovered(ctx, opPublish, m.name)
		case untried:
			failed = append(failed, outbox.Failure{Pending: p})
		case refused, permanent:
			if m.g != nil && m.g.n > 1 {
				shared = append(shared, m)
				continue
			}
			failed = append(failed, r.refusal(ctx, &lines, p, m.name, err, o == permanent))
		default:
			unknown++
			r.tel.failed(ctx, opUnknown)
			lines.add(failureKind{op: opUnknown, topic: m.name, code: errorCode(err)}, slog.LevelWarn, "relay: the outcome of a publish is unknown; the message stays held until its lease lapses, then is published again",
				"topic", p.Topic, "child_key", p.ChildKey, "error", err)
		}
	}
	if resume {
		for k, pub := range paused {
			pub.ResumePublish(k.orderingKey)
		}
	}
	return sent, failed, unknown, shared
}

// refusal decides what becomes of p, which Pub/Sub refused with err: it
// is published again after a backoff, or given up at MaxAttempts (at once
// when permanent). Its log line joins the round's lines.
func (r *Relay) refusal(ctx context.Context, lines *roundLines, p outbox.Pending, name string, err error, permanent bool) outbox.Failure {
	r.tel.failed(ctx, opPublish)
	f := outbox.Failure{Pending: p, Reason: err.Error()}
	attempts := p.Attempts + 1
	if permanent || r.opts.MaxAttempts > 0 && attempts >= r.opts.MaxAttempts {
		f.Dead, f.Release = true, r.opts.ReleaseDead
		r.tel.died(ctx)
		lines.add(failureKind{op: logDead, topic: name, code: errorCode(err)}, slog.LevelError, "relay: a message is given up; it stays in the outbox, listed by idemgate relay -dead, until an operator revives it",
			"topic", p.Topic, "child_key", p.ChildKey, "attempts", attempts, "reason", f.Reason, "releases_key", f.Release)
		return f
	}
	f.After = r.backoff(p.Attempts)
	lines.add(failureKind{op: opPublish, topic: name, code: errorCode(err)}, slog.LevelWarn, "relay: Pub/Sub refused a publish; the message will be published again after a backoff",
		"topic", p.Topic, "child_key", p.ChildKey, "attempts", attempts, slog.Float64("retry_in_ms", float64(f.After)/float64(time.Millisecond)), "error", err)
	return f
}

// backoff returns the wait after a failure of a message that had failed
// before times: MinBackoff doubled that often, at most MaxBackoff, drawn
// between half of it and all of it.
func (r *Relay) backoff(before int) time.Duration {
	d := r.opts.MinBackoff
	for i := 0; i < before && d < r.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.opts.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}
