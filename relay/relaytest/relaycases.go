package relaytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
)

// relayCases run relays against Config.PubSub.
var relayCases = []testCase{
	{"TwoRelaysPublishOnce", twoRelaysPublishOnce},
	{"DeadRelayRepublished", deadRelayRepublished},
	{"OrderingKeysKeepOrder", orderingKeysKeepOrder},
}

// waitFor bounds each wait for messages to arrive.
const waitFor = 60 * time.Second

// arrival is one message a subscription received.
type arrival struct {
	id, childKey, orderingKey, data string
}

// sink is a topic with a subscription (ordering enabled) whose messages
// are received and acknowledged as they come.
type sink struct {
	topic string
	mu    sync.Mutex // guards got
	got   []arrival
}

// newSink creates a topic and its subscription of unique names and
// receives until t ends.
func newSink(t testing.TB, c *pubsub.Client, name string) *sink {
	t.Helper()
	ctx := t.Context()
	project := strings.Split(c.Publisher("x").String(), "/")[1]
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	topic, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/" + project + "/topics/" + name + "-" + suffix})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	sub, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/" + name + "-" + suffix, Topic: topic.Name,
		AckDeadlineSeconds: 30, EnableMessageOrdering: true,
	})
	if err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	s := &sink{topic: topic.Name}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Subscriber(sub.Name).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			s.mu.Lock()
			s.got = append(s.got, arrival{m.ID, m.Attributes[outbox.ChildKeyAttribute], m.OrderingKey, string(m.Data)})
			s.mu.Unlock()
			m.Ack()
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

// arrivals returns what arrived so far.
func (s *sink) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.got...)
}

// publishes maps each child key to the distinct messageIds it arrived
// under: one per publish (a redelivery keeps its messageId).
func (s *sink) publishes() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, a := range s.arrivals() {
		if out[a.childKey] == nil {
			out[a.childKey] = map[string]bool{}
		}
		out[a.childKey][a.id] = true
	}
	return out
}

// await waits until every child key of want arrived.
func (s *sink) await(t testing.TB, want []string) {
	t.Helper()
	if !until(waitFor, func() bool {
		got := s.publishes()
		for _, k := range want {
			if len(got[k]) == 0 {
				return false
			}
		}
		return true
	}) {
		got := s.publishes()
		missing := 0
		for _, k := range want {
			if len(got[k]) == 0 {
				missing++
			}
		}
		t.Fatalf("%d of %d committed messages never arrived within %v: every committed message must be published", missing, len(want), waitFor)
	}
}

// runRelay runs a relay on src until the returned stop is called (or t
// ends).
func (e *env) runRelay(t testing.TB, src relay.Source, opts relay.Options) (stop func()) {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	r, err := relay.New(src, e.cfg.PubSub, &opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// enqueueMany commits n messages to topic in transactions of perTx, with
// ordering keys from keyOf (nil: unordered), and returns their child keys
// in enqueue order.
func (e *env) enqueueMany(t testing.TB, topic string, n, perTx int, keyOf func(i int) string) []string {
	t.Helper()
	var keys []string
	for i := 0; i < n; i += perTx {
		var msgs []outbox.Message
		for j := i; j < min(n, i+perTx); j++ {
			m := outbox.Message{Topic: topic, Data: []byte(fmt.Sprint(j))}
			if keyOf != nil {
				m.OrderingKey = keyOf(j)
			}
			msgs = append(msgs, m)
		}
		c := e.enqueue(t, msgs...)
		for j := range msgs {
			keys = append(keys, outbox.ChildKey(c.Key, fmt.Sprint(j)))
		}
	}
	return keys
}

// drained waits until the outbox is empty.
func (e *env) drained(t testing.TB) {
	t.Helper()
	if !until(waitFor, func() bool {
		n, err := e.src.Backlog(e.ctx)
		return err == nil && n == 0
	}) {
		t.Fatalf("the outbox still holds messages after %v: published messages must be marked sent", waitFor)
	}
}

func twoRelaysPublishOnce(t testing.TB, e *env) {
	s := newSink(t, e.cfg.PubSub, "once")
	want := e.enqueueMany(t, s.topic, 40, 4, nil)
	stopA := e.runRelay(t, e.src, relay.Options{BatchSize: 3, Lease: time.Minute})
	stopB := e.runRelay(t, e.src, relay.Options{BatchSize: 3, Lease: time.Minute})
	more := e.enqueueMany(t, s.topic, 20, 2, nil) // while both run
	want = append(want, more...)
	s.await(t, want)
	e.drained(t)
	stopA()
	stopB()
	for k, ids := range s.publishes() {
		if len(ids) != 1 {
			t.Errorf("child key %s was published %d times by two live relays: each message must be handed to one relay at a time", k, len(ids))
		}
	}
}

// dyingSource is a Source whose relay dies between publishing a batch and
// marking it sent: its first Settle records the batch, settles nothing
// and calls die.
type dyingSource struct {
	relay.Source
	once sync.Once
	die  func()
	mu   sync.Mutex // guards sent
	sent []outbox.Pending
}

func (d *dyingSource) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	killed := false
	d.once.Do(func() {
		d.mu.Lock()
		d.sent = sent
		d.mu.Unlock()
		killed = true
		d.die()
	})
	if killed {
		return errors.New("relaytest: the relay died before marking its batch")
	}
	return d.Source.Settle(ctx, sent, failed)
}

func deadRelayRepublished(t testing.TB, e *env) {
	s := newSink(t, e.cfg.PubSub, "dead")
	want := e.enqueueMany(t, s.topic, 12, 3, nil)
	died := make(chan struct{})
	dying := &dyingSource{Source: e.src, die: func() { close(died) }}
	// The dying relay's lease must outlast its publishes (half of it).
	lease := max(e.cfg.Lease, 2*time.Second)
	stopA := e.runRelay(t, dying, relay.Options{BatchSize: 5, Lease: lease})
	select {
	case <-died:
	case <-time.After(waitFor):
		t.Fatal("the first relay never settled a batch")
	}
	stopA()
	dying.mu.Lock()
	published := childKeys(dying.sent)
	dying.mu.Unlock()
	if len(published) == 0 {
		t.Fatal("the first relay published nothing of its batch before it died (publishes too slow for its lease?)")
	}
	e.runRelay(t, e.src, relay.Options{BatchSize: 5, Lease: time.Minute})
	s.await(t, want)
	e.drained(t)
	// The republications may still be on their way.
	until(waitFor, func() bool {
		pubs := s.publishes()
		for _, k := range published {
			if len(pubs[k]) < 2 {
				return false
			}
		}
		return true
	})
	pubs := s.publishes()
	for _, k := range published {
		if len(pubs[k]) < 2 {
			t.Errorf("child key %s was published by the relay that died before marking it, so the other relay must publish it again (same child key): published %d times", k, len(pubs[k]))
		}
	}
	for k, ids := range pubs {
		if !contains(published, k) && len(ids) != 1 {
			t.Errorf("child key %s, not in the dead relay's batch, was published %d times", k, len(ids))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func orderingKeysKeepOrder(t testing.TB, e *env) {
	s := newSink(t, e.cfg.PubSub, "order")
	const n = 30
	keyOf := func(i int) string { return fmt.Sprint("key-", i%3) }
	want := e.enqueueMany(t, s.topic, n, 5, keyOf)
	e.runRelay(t, e.src, relay.Options{BatchSize: 4, Lease: time.Minute})
	e.runRelay(t, e.src, relay.Options{BatchSize: 4, Lease: time.Minute})
	s.await(t, want)
	e.drained(t)
	seen := map[string]bool{}
	last := map[string]int{}
	for _, a := range s.arrivals() {
		if seen[a.childKey] {
			continue // a redelivery
		}
		seen[a.childKey] = true
		var i int
		fmt.Sscan(a.data, &i)
		if prev, ok := last[a.orderingKey]; ok && i < prev {
			t.Errorf("ordering key %s: message %d arrived after %d; the messages of a key must be published in enqueue order", a.orderingKey, i, prev)
		}
		last[a.orderingKey] = i
	}
}

// listenWakesRelay checks that a relay that polls once an hour publishes
// a committed message within seconds: the source woke it.
func listenWakesRelay(t testing.TB, e *env) {
	s := newSink(t, e.cfg.PubSub, "wake")
	e.runRelay(t, e.src, relay.Options{PollInterval: time.Hour, Lease: time.Minute})
	var lags []time.Duration
	for range 5 {
		start := time.Now()
		want := e.enqueueMany(t, s.topic, 1, 1, nil)
		s.await(t, want)
		lags = append(lags, time.Since(start))
	}
	for _, l := range lags {
		if l > 20*time.Second {
			t.Errorf("a message took %v from commit to arrival with an hour's poll interval: the relay was not woken", l)
		}
	}
	t.Logf("commit → arrival with wake-ups: %v", lags)
}
