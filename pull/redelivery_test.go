package pull_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/store"
)

// pastAckDeadline is how far tests move pstest's clock to make an
// outstanding message's ack deadline pass: more than the client's
// deadlines (10 s, or 60 s with exactly-once delivery), less than pstest's
// 10 minutes of retention.
const pastAckDeadline = 2 * time.Minute

// TestLostAckRedeliveryIsDuplicate loses the ack of a processed message on
// its way to Pub/Sub. The ack deadline passes, Pub/Sub delivers the message
// again, and the gateway answers duplicate: fn ran once.
func TestLostAckRedeliveryIsDuplicate(t *testing.T) {
	lost := make(chan struct{})
	var acks atomic.Int32
	f := newFixture(t, setup{reactors: []pstest.ServerReactorOption{{
		FuncName: "Acknowledge",
		Reactor: reactorFunc(func(any) (bool, any, error) {
			if acks.Add(1) == 1 {
				close(lost)
				return true, &emptypb.Empty{}, nil // answered, but never applied
			}
			return false, nil, nil
		}),
	}}})
	id := f.publish("order 1")
	var runs atomic.Int32
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		runs.Add(1)
		return nil
	}, &pull.Options{Logger: f.logger()}))
	waitClosed(t, lost, "the first ack")
	f.waitModacked(id)
	f.advance(pastAckDeadline)
	waitOutcome(t, f.logs, gateway.OutcomeDuplicate, id, 1)
	f.waitAcked(id)
	stop()

	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1: the redelivery after a lost ack must be a duplicate", n)
	}
	if d, _ := f.message(id); d != 2 {
		t.Errorf("deliveries = %d, want 2", d)
	}
}

// TestAckDeadlinePassesDuringWork lets the ack deadline pass while fn
// works, so Pub/Sub hands the message out again while the first delivery
// still holds the key. The copies are nacked as in progress; the first
// delivery's late ack is refused (its ack ID is stale), and the copy that
// comes after the work finished is acked as a duplicate.
func TestAckDeadlinePassesDuringWork(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order 1")
	var runs atomic.Int32
	working, finish := make(chan struct{}), make(chan struct{})
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		if runs.Add(1) == 1 {
			close(working)
			<-finish
		}
		return nil
	}, &pull.Options{Logger: f.logger(), InProgressDelay: time.Millisecond}))
	release := sync.OnceFunc(func() { close(finish) })
	t.Cleanup(release) // before stop, should the test fail early
	waitClosed(t, working, "first delivery")
	f.waitModacked(id)
	f.advance(pastAckDeadline)
	waitOutcome(t, f.logs, gateway.OutcomeInProgress, id, 1)
	release()
	waitOutcome(t, f.logs, gateway.OutcomeDuplicate, id, 1)
	f.waitAcked(id)
	stop()

	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
	if n := len(matching(f.logs.Records(), gateway.OutcomeWon, id)); n != 1 {
		t.Errorf("%d won lines, want 1", n)
	}
}

// TestConcurrentReceivers runs two subscriber clients, as two instances of
// a service would, on one subscription with a shared store. Orders are
// published up to three times each (producer republishes, keyed by the
// order_id attribute): every order runs once, and every message is acked.
func TestConcurrentReceivers(t *testing.T) {
	f := newFixture(t, setup{})
	second, err := pubsub.NewClient(t.Context(), "p", testenv.PubSubClientOptions(f.srv.Addr)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })

	const orders = 60
	var ids []string
	var copies []int
	for o := range orders {
		for range 1 + o%3 {
			copies = append(copies, o)
		}
	}
	rand.Shuffle(len(copies), func(i, j int) { copies[i], copies[j] = copies[j], copies[i] })
	for _, o := range copies {
		ids = append(ids, f.publish("order", "order_id", fmt.Sprint(o)))
	}

	var runs counter
	var inFlight, overlap atomic.Int32
	fn := func(ctx context.Context, m *pubsub.Message) error {
		if inFlight.Add(1) > 1 {
			overlap.Store(1)
		}
		defer inFlight.Add(-1)
		runs.inc(m.Attributes["order_id"])
		runtime.Gosched()
		return nil
	}
	opts := &pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}, Logger: f.logger(), InProgressDelay: time.Millisecond}
	stopA := f.receive(f.sub, pull.Wrap(f.g, fn, opts))
	stopB := f.receiveWith(second, f.sub, pull.Wrap(f.g, fn, opts))

	f.logs.Wait(t, waitFor, "an ack of every message", func(recs logtest.Records) bool {
		acked := map[string]bool{}
		for _, r := range recs {
			if o := gateway.Outcome(r.Attrs["outcome"]); o == gateway.OutcomeWon || o == gateway.OutcomeDuplicate {
				acked[r.Attrs["delivery.message_id"]] = true
			}
		}
		return len(acked) == len(ids)
	})
	f.waitAcked(ids...)
	stopA()
	stopB()

	for o := range orders {
		if n := runs.get(fmt.Sprint(o)); n != 1 {
			t.Errorf("order %d ran %d times, want 1", o, n)
		}
	}
	t.Logf("%d messages, %d orders, in_progress nacks: %d, handlers overlapped: %v",
		len(ids), orders, len(matching(f.logs.Records(), gateway.OutcomeInProgress, "")), overlap.Load() == 1)
}

// TestDeadLetterAfterMaxAttempts: a message whose handler always fails is
// nacked on every attempt, each counted by Pub/Sub, and after the
// subscription's maximum it lands in the dead-letter topic. The claim is
// released each time, so the key stays free for a replay.
func TestDeadLetterAfterMaxAttempts(t *testing.T) {
	const maxAttempts = 5
	f := newFixture(t, setup{deadLetterAfter: maxAttempts})
	id := f.publish("poison")

	var mu sync.Mutex
	var attempts []int
	stop := f.receive(f.sub, pull.Wrap(f.g, func(_ context.Context, m *pubsub.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if m.DeliveryAttempt == nil {
			return errors.New("no delivery attempt")
		}
		attempts = append(attempts, *m.DeliveryAttempt)
		return errors.New("cannot parse")
	}, &pull.Options{Logger: f.logger()}))
	dead := make(chan *pubsub.Message, 1)
	stopDead := f.receive(f.dead, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		select {
		case dead <- m:
		default:
		}
	})
	var got *pubsub.Message
	select {
	case got = <-dead:
	case <-time.After(waitFor):
		t.Fatalf("nothing reached the dead-letter topic after %v\n%s", waitFor, f.logs.Records())
	}
	stop()
	stopDead()

	if got.ID != id || string(got.Data) != "poison" {
		t.Errorf("dead-lettered message %s %q, want %s %q", got.ID, got.Data, id, "poison")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 2, 3, 4, 5}; !slices.Equal(attempts, want) {
		t.Errorf("fn saw delivery attempts %v, want %v", attempts, want)
	}
	var logged []string
	for _, r := range matching(f.logs.Records(), gateway.OutcomeFailed, id) {
		logged = append(logged, r.Attrs["delivery.delivery_attempt"])
	}
	if want := []string{"1", "2", "3", "4", "5"}; !slices.Equal(logged, want) {
		t.Errorf("failed lines carry delivery_attempt %v, want %v", logged, want)
	}
	c, err := f.st.Claim(t.Context(), id, time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Errorf("after only failures the key must be free: Claim = %v, %v", c.Status, err)
	}
}

// reactorFunc adapts a function to pstest.Reactor.
type reactorFunc func(req any) (handled bool, ret any, err error)

func (f reactorFunc) React(req any) (bool, any, error) { return f(req) }

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("no %s after %v", what, waitFor)
	}
}
