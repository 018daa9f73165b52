package pull_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// TestOrderedInProgressIsNotNacked: with message ordering, a message whose
// key another instance still holds is not nacked while that holder lives:
// it is held and tried again in place until the holder settles. (A nack
// lets the key's later messages overtake it: the Pub/Sub service hands a
// subscriber a key's later messages with the earlier one, and the client
// runs the next as soon as the callback of the nacked one returns. pstest
// delivers one message per ordering key at a time, so it cannot show the
// overtaking itself; TestOrderedInProgressIsNotOvertaken does, against the
// client's scheduler.)
func TestOrderedInProgressIsNotNacked(t *testing.T) {
	f := newFixture(t, setup{sub: &pubsubpb.Subscription{EnableMessageOrdering: true}, deadLetterAfter: 100})
	first := f.srv.PublishOrdered(f.topic, []byte("update 1"), nil, "po-7")
	second := f.srv.PublishOrdered(f.topic, []byte("update 2"), nil, "po-7")
	held, err := f.st.Claim(t.Context(), first, 30*time.Minute, store.ClaimOptions{}) // another instance still runs update 1
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran []string
	opts := &pull.Options{Logger: f.logger(), InProgressDelay: time.Hour}
	end := heldTimer(t, f.logs, opts)
	stop := f.receive(f.sub, pull.Wrap(f.g, func(_ context.Context, m *pubsub.Message) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, string(m.Data))
		return nil
	}, opts))

	f.logs.Wait(t, waitFor, "hold of the first update", func(recs logtest.Records) bool { return len(holds(recs)) >= 1 })
	end()
	f.logs.Wait(t, waitFor, "second hold", func(recs logtest.Records) bool { return len(holds(recs)) >= 2 })
	if d, _ := f.message(first); d != 1 {
		t.Fatalf("the first update was delivered %d times while its holder lived, want 1: it was nacked\n%s", d, f.logs.Records())
	}
	for _, r := range matching(f.logs.Records(), gateway.OutcomeInProgress, first) {
		if a := r.Attrs["delivery.delivery_attempt"]; a != "1" {
			t.Errorf("in_progress line of delivery attempt %s, want only attempt 1", a)
		}
	}

	if _, err := f.st.Complete(t.Context(), held); err != nil { // the other instance is done
		t.Fatal(err)
	}
	end()
	waitOutcome(t, f.logs, gateway.OutcomeDuplicate, first, 1)
	waitOutcome(t, f.logs, gateway.OutcomeWon, second, 1)
	f.waitAcked(first, second)
	stop()

	if d, _ := f.message(first); d != 1 {
		t.Errorf("%d deliveries of the first update, want 1", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"update 2"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v (update 1 was the other instance's)", ran, want)
	}
}

// TestOrderedInProgressIsNotOvertaken plays the client's receive scheduler
// (cloud.google.com/go/pubsub/v2/internal/scheduler): the callbacks of one
// ordering key run one after the other, the next as soon as the previous
// returns, nacked or not. Another instance holds update 1's key; update 2
// must not run before that holder has finished update 1.
func TestOrderedInProgressIsNotOvertaken(t *testing.T) {
	logs := &logtest.Sink{}
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(st, &gateway.Options{Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.Claim(t.Context(), "m-1", 30*time.Minute, store.ClaimOptions{}) // another instance runs update 1
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []string
	note := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	opts := &pull.Options{Logger: logs.Logger(), InProgressDelay: time.Hour}
	end := heldTimer(t, logs, opts)
	cb := pull.Wrap(g, func(_ context.Context, m *pubsub.Message) error {
		note("ran " + m.ID)
		logs.Logger().Info("test: ran", "id", m.ID)
		return nil
	}, opts)
	acks := []*ackRecorder{{}, {}}
	msgs := make([]*pubsub.Message, 2)
	for i := range msgs {
		msgs[i] = newMessage(t, "m-"+strconv.Itoa(i+1), acks[i])
		msgs[i].OrderingKey = "po-7"
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends any hold, should the test fail early
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, m := range msgs { // one ordering key: one after the other
			cb(ctx, m)
		}
	}()

	logs.Wait(t, waitFor, "hold of update 1", func(recs logtest.Records) bool { return len(holds(recs)) >= 1 })
	end()
	logs.Wait(t, waitFor, "second hold, or update 2 running", func(recs logtest.Records) bool {
		return len(holds(recs)) >= 2 || len(recs.Containing("test: ran")) > 0
	})
	heldAgain := len(holds(logs.Records())) >= 2
	if _, err := st.Complete(t.Context(), held); err != nil { // the other instance is done
		t.Fatal(err)
	}
	note("update 1 done elsewhere")
	if heldAgain {
		end()
	}
	waitClosed(t, done, "the end of both callbacks")

	mu.Lock()
	defer mu.Unlock()
	if want := []string{"update 1 done elsewhere", "ran m-2"}; !slices.Equal(events, want) {
		t.Errorf("events %v, want %v: update 2 must wait for update 1", events, want)
	}
	if v1, v2 := acks[0].Verdict(), acks[1].Verdict(); v1 != "Ack" || v2 != "Ack" {
		t.Errorf("verdicts %s, %s; want Ack (a duplicate), Ack", v1, v2)
	}
}

// TestOrderedMutexContentionRunsAgainInPlace: a message with an ordering
// key whose handler's own Mutex is held is not nacked either, even with a
// negative InProgressDelay (nack at once), which would break the order:
// it waits (never for nothing) and runs the handler again in place once
// the Mutex is free. If Receive stops meanwhile, it is nacked. A positive
// InProgressDelay shorter than the floor of such waits is the wait.
func TestOrderedMutexContentionRunsAgainInPlace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stopping bool
		delay    time.Duration // InProgressDelay
		hold     time.Duration // the wait before the handler runs again
		behind   time.Duration // how far the store's clock is behind ours
	}{
		{"holder done", false, -1, pull.DefaultInProgressDelay, 0},
		{"Receive stops", true, -1, pull.DefaultInProgressDelay, 0},
		{"short InProgressDelay", false, 10 * time.Millisecond, 10 * time.Millisecond, 0},
		// The holder's lease ended by our clock, not by the store's: the
		// shortest wait (100ms), not none.
		{"holder's lease over by our clock", false, -1, 100 * time.Millisecond, time.Hour},
	} {
		stopping := tc.stopping
		t.Run(tc.name, func(t *testing.T) {
			logs := &logtest.Sink{}
			st, err := memstore.New(&memstore.Options{Now: func() time.Time { return time.Now().Add(-tc.behind) }})
			if err != nil {
				t.Fatal(err)
			}
			// A budget of one attempt: waiting on the Mutex is contention,
			// and must not spend it.
			g, err := gateway.New(st, &gateway.Options{Logger: logs.Logger(), MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			holder, err := st.Claim(t.Context(), "po:7", 30*time.Minute, store.ClaimOptions{}) // another update of the order runs
			if err != nil {
				t.Fatal(err)
			}
			opts := &pull.Options{Logger: logs.Logger(), InProgressDelay: tc.delay}
			end := heldTimer(t, logs, opts)
			var applied atomic.Int32
			cb := pull.Wrap(g, func(ctx context.Context, _ *pubsub.Message) error {
				return g.Mutex(ctx, "po:7", func(context.Context) error {
					applied.Add(1)
					return nil
				})
			}, opts)
			acks := &ackRecorder{}
			m := newMessage(t, "m-1", acks)
			m.OrderingKey = "po-7"
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			done := make(chan struct{})
			go func() {
				defer close(done)
				cb(ctx, m)
			}()

			logs.Wait(t, waitFor, "hold", func(recs logtest.Records) bool { return len(holds(recs)) >= 1 })
			if d, err := time.ParseDuration(holds(logs.Records())[0].Attrs["duration"]); err != nil || d != tc.hold {
				t.Errorf("held for %v (%v), want %v: a negative InProgressDelay must not make an ordered message spin, a short positive one is the wait", d, err, tc.hold)
			}
			if stopping {
				cancel()
			} else {
				if err := st.Release(t.Context(), holder); err != nil {
					t.Fatal(err)
				}
				end()
			}
			waitClosed(t, done, "the end of the callback")

			want, runs := "Ack", int32(1)
			if stopping {
				want, runs = "Nack", 0
			}
			if v := acks.Verdict(); v != want {
				t.Errorf("verdict %s, want %s", v, want)
			}
			if n := applied.Load(); n != runs {
				t.Errorf("the update was applied %d times, want %d", n, runs)
			}
		})
	}
}
