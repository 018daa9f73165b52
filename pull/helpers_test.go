package pull_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"go.uber.org/goleak"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// waitFor bounds every wait on an event in these tests.
const waitFor = 20 * time.Second

// checkLeaks fails t if goroutines started during t outlive it. Call it
// first, so that its cleanup runs after the others (they run last-in
// first-out). Tests that use it must not run in parallel.
func checkLeaks(t *testing.T) {
	t.Helper()
	opts := []goleak.Option{
		goleak.IgnoreCurrent(),
		// The wait of a shared emulator, stopped by testenv.Main.
		goleak.IgnoreAnyFunction("github.com/idemgate/idemgate/internal/testenv.Start.func1"),
		// pubsub/v2 v2.9.0 checks for the end of Receive only between ticks
		// of its stream keep-alive timers, so this goroutine outlives
		// Receive by up to one tick (seconds). It does end.
		goleak.IgnoreTopFunction("cloud.google.com/go/pubsub/v2.(*messageIterator).streamKeepAliveHandler"),
	}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// fixture is a pstest server with one topic and one subscription, a client
// connected to it, and a gateway over a memstore that logs into logs.
type fixture struct {
	t      *testing.T
	srv    *pstest.Server
	client *pubsub.Client
	topic  string // full names
	sub    string
	dead   string // the dead-letter topic's subscription, with setup.deadLetterAfter
	st     *memstore.Store
	g      *gateway.Gateway
	logs   *logtest.Sink
	skew   atomic.Int64 // added to the pstest server's clock, in nanoseconds

	mu       sync.Mutex      // guards the fields below
	modacked map[string]bool // message IDs whose deadline a client has set
	changed  chan struct{}   // closed and replaced when modacked grows
}

// setup configures a fixture.
type setup struct {
	sub *pubsubpb.Subscription // settings of the subscription; Name and Topic are filled in
	// deadLetterAfter, if positive, gives the subscription a dead-letter
	// topic after that many delivery attempts. Pub/Sub then also counts
	// attempts in Message.DeliveryAttempt.
	deadLetterAfter int32
	reactors        []pstest.ServerReactorOption
	store           store.Store // default the fixture's memstore
	hideKeys        bool        // the gateway's Options.HideKeys
}

func newFixture(t *testing.T, s setup) *fixture {
	t.Helper()
	checkLeaks(t)
	f := &fixture{t: t, logs: &logtest.Sink{}, modacked: map[string]bool{}, changed: make(chan struct{})}
	watch := pstest.ServerReactorOption{FuncName: "ModifyAckDeadline", Reactor: reactorFunc(f.watchModack)}
	srv, c := fakepubsub.NewProject(t, "p", append([]pstest.ServerReactorOption{watch}, s.reactors...)...)
	srv.SetTimeNowFunc(func() time.Time { return time.Now().Add(time.Duration(f.skew.Load())) })
	ctx := t.Context()
	f.srv, f.client = srv, c
	f.topic, f.sub = f.createTopic("orders"), "projects/p/subscriptions/orders-sub"
	sub := s.sub
	if sub == nil {
		sub = &pubsubpb.Subscription{}
	}
	sub.Name, sub.Topic = f.sub, f.topic
	if s.deadLetterAfter > 0 {
		dt := f.createTopic("orders-dead")
		f.dead = "projects/p/subscriptions/orders-dead-sub"
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: f.dead, Topic: dt}); err != nil {
			t.Fatalf("CreateSubscription: %v", err)
		}
		sub.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: dt, MaxDeliveryAttempts: s.deadLetterAfter}
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, sub); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}

	var err error
	if f.st, err = memstore.New(nil); err != nil {
		t.Fatal(err)
	}
	st := s.store
	if st == nil {
		st = f.st
	}
	f.g, err = gateway.New(st, &gateway.Options{Logger: f.logger(), HideKeys: s.hideKeys})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) createTopic(id string) string {
	f.t.Helper()
	name := "projects/p/topics/" + id
	if _, err := f.client.TopicAdminClient.CreateTopic(f.t.Context(), &pubsubpb.Topic{Name: name}); err != nil {
		f.t.Fatalf("CreateTopic: %v", err)
	}
	return name
}

// logger logs into the fixture's sink.
func (f *fixture) logger() *slog.Logger { return slog.New(f.logs.Handler()) }

// publish publishes data with attrs (pairs of name and value) and returns
// the message ID.
func (f *fixture) publish(data string, attrs ...string) string {
	f.t.Helper()
	var m map[string]string
	if len(attrs) > 0 {
		m = map[string]string{}
		for i := 0; i+1 < len(attrs); i += 2 {
			m[attrs[i]] = attrs[i+1]
		}
	}
	return f.srv.Publish(f.topic, []byte(data), m)
}

// watchModack is a pstest reactor that notes which messages had their ack
// deadline set (not nacked), and lets the request through.
func (f *fixture) watchModack(req any) (bool, any, error) {
	r := req.(*pubsubpb.ModifyAckDeadlineRequest)
	if r.AckDeadlineSeconds == 0 {
		return false, nil, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ackID := range r.AckIds {
		// pstest's ack IDs are "<message ID>:<delivery>".
		f.modacked[ackID[:strings.LastIndexByte(ackID, ':')]] = true
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return false, nil, nil
}

// waitModacked waits until the client has set the ack deadline of message
// id: it does so on receipt, asynchronously, and a receipt that arrives
// after advance would push the deadline past it again.
func (f *fixture) waitModacked(id string) {
	f.t.Helper()
	timeout := time.NewTimer(waitFor)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		ok, ch := f.modacked[id], f.changed
		f.mu.Unlock()
		if ok {
			// The reactor runs under the server's lock, before the server
			// applies the deadline; taking the lock waits for that.
			f.srv.Message(id)
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			f.t.Fatalf("the client did not set the ack deadline of %s within %v", id, waitFor)
		}
	}
}

// advance moves the pstest server's clock forward, so that ack deadlines
// of outstanding messages pass without waiting for them.
func (f *fixture) advance(d time.Duration) { f.skew.Add(int64(d)) }

// receive runs Receive on sub with cb until the returned stop is called (or
// the test ends), and fails the test if Receive fails.
func (f *fixture) receive(sub string, cb func(context.Context, *pubsub.Message)) (stop func()) {
	return f.receiveWith(f.client, sub, cb)
}

func (f *fixture) receiveWith(c *pubsub.Client, sub string, cb func(context.Context, *pubsub.Message)) (stop func()) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := c.Subscriber(sub)
	go func() { done <- s.Receive(ctx, cb) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				f.t.Errorf("Receive on %s: %v", sub, err)
			}
		})
	}
	f.t.Cleanup(stop)
	return stop
}

// message returns pstest's view of message id: deliveries and acks.
func (f *fixture) message(id string) (deliveries, acks int) {
	m := f.srv.Message(id)
	if m == nil {
		f.t.Fatalf("no message %s", id)
	}
	return m.Deliveries, m.Acks
}

// waitAcked waits until pstest has recorded an ack of each message. Acks
// leave the client in batches, a little after the callback returned.
func (f *fixture) waitAcked(ids ...string) {
	f.t.Helper()
	deadline := time.Now().Add(waitFor)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		missing := 0
		for _, id := range ids {
			if _, acks := f.message(id); acks == 0 {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d of %d messages not acked after %v\n%s", missing, len(ids), waitFor, f.logs.Records())
		}
		<-tick.C
	}
}

// counter counts calls per key; safe for concurrent use.
type counter struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

func (c *counter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}
