package relaytest

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
)

// limitCases run relays against a Pub/Sub fake of their own (pstest),
// slowed or refusing as each case needs, through the real client.
var limitCases = []testCase{
	{"SlowPubSubPublishesOnce", slowPubSubPublishesOnce},
	{"RefusalBlamesItsMessage", refusalBlamesItsMessage},
	{"SlowRefusalDies", slowRefusalDies},
}

// fake is a pstest server with a topic, and a client of it whose every
// Publish RPC takes delay more before it reaches the server.
type fake struct {
	srv   *pstest.Server
	c     *pubsub.Client
	topic string
}

// newFake starts a fake; refuse, when not nil, answers each publish
// request the server gets: an error refuses the request whole.
func newFake(t testing.TB, delay time.Duration, refuse func(*pubsubpb.PublishRequest) error) *fake {
	t.Helper()
	var reactors []pstest.ServerReactorOption
	if refuse != nil {
		reactors = append(reactors, pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactor(func(req any) (bool, any, error) {
			if err := refuse(req.(*pubsubpb.PublishRequest)); err != nil {
				return true, (*pubsubpb.PublishResponse)(nil), err
			}
			return false, nil, nil
		})})
	}
	var slow grpc.UnaryClientInterceptor
	if delay > 0 {
		slow = fakepubsub.Slow(delay)
	}
	srv, c := fakepubsub.NewIntercepted(t, "p", slow, reactors...)
	f := &fake{srv: srv, c: c, topic: "projects/p/topics/limits"}
	if _, err := c.TopicAdminClient.CreateTopic(t.Context(), &pubsubpb.Topic{Name: f.topic}); err != nil {
		t.Fatal(err)
	}
	return f
}

// reactor is a pstest reactor made of a function.
type reactor func(req any) (handled bool, ret any, err error)

func (f reactor) React(req any) (bool, any, error) { return f(req) }

// publishes counts the publishes of each child key that reached the fake.
func (f *fake) publishes() map[string]int {
	n := map[string]int{}
	for _, m := range f.srv.Messages() {
		n[m.Attributes[outbox.ChildKeyAttribute]]++
	}
	return n
}

// runRelay runs a relay on the fake (see env.runRelay).
func (f *fake) runRelay(t testing.TB, e *env, opts relay.Options) (stop func()) {
	t.Helper()
	on := *e
	on.cfg.PubSub = f.c
	return on.runRelay(t, e.src, opts)
}

// slowPubSubPublishesOnce: one live relay publishes each message once
// while every publish takes half its lease, with many keys in flight at
// once (more requests than the client's default workers). Requests that
// waited in the client for a worker reached Pub/Sub after their lease
// lapsed, and the relay took and published their messages again.
func slowPubSubPublishesOnce(t testing.TB, e *env) {
	const (
		lease = 2 * time.Second
		delay = lease / 2
	)
	f := newFake(t, delay, nil)
	want := e.enqueueMany(t, f.topic, 300, 25, func(i int) string { return fmt.Sprint("key-", i) })
	stop := f.runRelay(t, e, relay.Options{BatchSize: 25, Lease: lease})
	if !until(waitFor, func() bool {
		got := f.publishes()
		return !slices.ContainsFunc(want, func(k string) bool { return got[k] == 0 })
	}) {
		t.Fatalf("not every committed message was published within %v", waitFor)
	}
	e.drained(t)
	stop()
	twice, example := 0, ""
	for k, n := range f.publishes() {
		if n > 1 {
			twice++
			example = fmt.Sprintf("%s %d times", k, n)
		}
	}
	if twice > 0 {
		t.Errorf("one live relay published %d of %d messages more than once (%s) with publishes answered in %v and a lease of %v: every answer must come before the lease lapses", twice, len(want), example, delay, lease)
	}
}

// refusalBlamesItsMessage: Pub/Sub refuses a request whole for one bad
// message in it (here a schema that refuses its data); the relay counts
// the refusal only against the bad message. The good messages of the
// request are published; the bad ones die; the later message of a dead
// message's ordering key waits behind it, neither dead nor published.
func refusalBlamesItsMessage(t testing.TB, e *env) {
	refuse := func(r *pubsubpb.PublishRequest) error {
		for _, m := range r.Messages {
			if strings.HasPrefix(string(m.Data), "bad") {
				return status.Error(codes.InvalidArgument, "the message does not match the topic's schema")
			}
		}
		return nil
	}
	f := newFake(t, 0, refuse)
	msgs := []outbox.Message{
		{Data: []byte("u1")}, {Data: []byte("bad-u")}, {Data: []byte("u2")},
		{Data: []byte("a1"), OrderingKey: "a"}, {Data: []byte("bad-a"), OrderingKey: "a"}, {Data: []byte("a2"), OrderingKey: "a"},
		{Data: []byte("bad-b"), OrderingKey: "b"}, {Data: []byte("b1"), OrderingKey: "b"},
	}
	for i := range msgs {
		msgs[i].Topic = f.topic
	}
	c := e.enqueue(t, msgs...) // one Take: each key's messages, and the unordered ones, share a request
	key := map[string]string{}
	for i, m := range msgs {
		key[string(m.Data)] = outbox.ChildKey(c.Key, fmt.Sprint(i))
	}
	dl := e.deadLetters(t)
	var dead []outbox.DeadMessage
	stop := f.runRelay(t, e, relay.Options{MaxAttempts: 2, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Lease: time.Minute})
	if !until(waitFor, func() bool {
		var err error
		dead, err = dl.Dead(e.ctx, 10)
		return err == nil && len(dead) >= 3
	}) {
		t.Fatalf("%d messages dead after %v; want the three bad ones, each refused twice", len(dead), waitFor)
	}
	stop()
	var died []string
	for _, d := range dead {
		died = append(died, string(d.Data))
	}
	slices.Sort(died)
	if want := []string{"bad-a", "bad-b", "bad-u"}; !slices.Equal(died, want) {
		t.Errorf("dead %q, want %q: a refusal of a request counts only against the message Pub/Sub refused, not those it shared the request with", died, want)
	}
	got := f.publishes()
	for _, d := range []string{"u1", "u2", "a1"} {
		if got[key[d]] != 1 {
			t.Errorf("%s published %d times, want once: a good message in a refused request is published", d, got[key[d]])
		}
	}
	for _, d := range []string{"a2", "b1"} {
		if got[key[d]] != 0 {
			t.Errorf("%s was published past the dead message of its ordering key", d)
		}
	}
	e.backlog(t, 2, "the later messages of the dead messages' keys wait behind them")
}

// slowRefusalDies: behind a Pub/Sub that answers later than an eighth of
// the lease, a request refused whole for one bad message comes back too
// late to publish its messages alone in the same round, so they go back
// untried; the next round must still publish them alone, so that the bad
// message's refusals count and it dies within MaxAttempts instead of
// being refused in a shared request for ever.
func slowRefusalDies(t testing.TB, e *env) {
	const (
		lease       = 2 * time.Second
		delay       = lease / 4
		maxAttempts = 2
		bound       = 10 // refused requests with the bad message in them, at most
	)
	var refusals atomic.Int32
	refuse := func(r *pubsubpb.PublishRequest) error {
		for _, m := range r.Messages {
			if string(m.Data) == "bad" {
				refusals.Add(1)
				return status.Error(codes.InvalidArgument, "the message does not match the topic's schema")
			}
		}
		return nil
	}
	f := newFake(t, delay, refuse)
	msgs := []outbox.Message{{Data: []byte("good-1")}, {Data: []byte("bad")}, {Data: []byte("good-2")}}
	for i := range msgs {
		msgs[i].Topic = f.topic
	}
	c := e.enqueue(t, msgs...) // one Take: the three share a request
	dl := e.deadLetters(t)
	var dead []outbox.DeadMessage
	stop := f.runRelay(t, e, relay.Options{MaxAttempts: maxAttempts, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Lease: lease})
	if !until(waitFor, func() bool {
		var err error
		dead, err = dl.Dead(e.ctx, 10)
		return err == nil && len(dead) > 0 || refusals.Load() > bound
	}) {
		t.Fatalf("nothing dead after %v; want the bad message, refused %d times", waitFor, maxAttempts)
	}
	stop()
	if len(dead) != 1 || string(dead[0].Data) != "bad" {
		t.Fatalf("dead %v after %d refused requests; want the bad message alone, dead after %d refusals: "+
			"a message refused in a shared request and given back late is published alone next round, so its refusals count",
			dead, refusals.Load(), maxAttempts)
	}
	got := f.publishes()
	for _, i := range []int{0, 2} {
		if k := outbox.ChildKey(c.Key, fmt.Sprint(i)); got[k] != 1 {
			t.Errorf("%s published %d times, want once: a good message in a refused request is published", msgs[i].Data, got[k])
		}
	}
	e.backlog(t, 0, "the good messages are marked sent, the dead one is out of the backlog")
}
