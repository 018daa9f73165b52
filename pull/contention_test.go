package pull_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pull"
)

// holdLine is the message of the line heldTimer writes when a Wrap starts
// holding a message.
const holdLine = "test: hold"

// heldTimer makes the Wraps built with o hold messages until the test ends
// each hold with end(). Every hold writes a holdLine (with its duration)
// to logs first, so that a test can wait for it with logs.Wait.
func heldTimer(t *testing.T, logs *logtest.Sink, o *pull.Options) (end func()) {
	ends := make(chan time.Time)
	lg := logs.Logger()
	pull.SetHoldTimer(o, func(d time.Duration) <-chan time.Time {
		lg.Info(holdLine, "duration", d)
		return ends
	})
	return func() {
		t.Helper()
		select {
		case ends <- time.Now():
		case <-time.After(waitFor):
			t.Fatalf("no message was held to release after %v", waitFor)
		}
	}
}

// holds returns the holdLine records.
func holds(recs logtest.Records) logtest.Records {
	return recs.Where(func(r logtest.Record) bool { return r.Message == holdLine })
}

// TestHandlersMutexContentionIsPaced: "Lock on the message, Mutex on the
// entity". Two updates of one purchase order; the first holds the order's
// Mutex until the test lets it go. The second's handler meets the Mutex
// held: it must be held before its nack, as a message whose own key is held
// is, not nacked in a tight loop that spends its delivery attempts (with
// 10 attempts it was dead-lettered within 100 ms), and it must run once
// the first is done.
func TestHandlersMutexContentionIsPaced(t *testing.T) {
	f := newFixture(t, setup{deadLetterAfter: 10})
	working, finish := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var applied []string
	opts := &pull.Options{Logger: f.logger(), InProgressDelay: time.Hour}
	end := heldTimer(t, f.logs, opts)
	stop := f.receive(f.sub, pull.Wrap(f.g, func(ctx context.Context, m *pubsub.Message) error {
		return f.g.Mutex(ctx, "po:"+m.Attributes["po_id"], func(context.Context) error {
			if string(m.Data) == "update 1" {
				close(working)
				<-finish
			}
			mu.Lock()
			applied = append(applied, string(m.Data))
			mu.Unlock()
			return nil
		})
	}, opts))
	release := sync.OnceFunc(func() { close(finish) })
	t.Cleanup(release) // before stop, should the test fail early

	first := f.publish("update 1", "po_id", "7")
	waitClosed(t, working, "first update holding the order's Mutex")
	second := f.publish("update 2", "po_id", "7")

	// Held, or spinning: whichever shows first.
	f.logs.Wait(t, waitFor, "hold of the second update, or its third delivery", func(recs logtest.Records) bool {
		return len(holds(recs)) > 0 || len(matching(recs, gateway.OutcomeFailed, second)) >= 3
	})
	if d, _ := f.message(second); len(holds(f.logs.Records())) == 0 || d != 1 {
		t.Fatalf("the second update was nacked at once: %d deliveries while the first held the Mutex, no hold\n%s", d, f.logs.Records())
	}
	// The hold ends with the Mutex holder's lease at the latest.
	if d, err := time.ParseDuration(holds(f.logs.Records())[0].Attrs["duration"]); err != nil || d <= 0 || d > gateway.DefaultRenewedLease {
		t.Errorf("held for %v (%v), want at most the Mutex holder's lease (%v)", d, err, gateway.DefaultRenewedLease)
	}
	end() // nacked after its hold: delivered again, still contended
	f.logs.Wait(t, waitFor, "second hold", func(recs logtest.Records) bool { return len(holds(recs)) >= 2 })
	if d, _ := f.message(second); d != 2 {
		t.Errorf("%d deliveries of the second update after one hold, want 2", d)
	}

	release()
	waitOutcome(t, f.logs, gateway.OutcomeWon, first, 1)
	end()
	waitOutcome(t, f.logs, gateway.OutcomeWon, second, 1)
	f.waitAcked(first, second)
	stop()

	if d, _ := f.message(second); d != 3 {
		t.Errorf("%d deliveries of the second update, want 3 (two held while the first ran, then the one that ran)", d)
	}
	// Contention, not a failure: WARN, never ERROR.
	for _, r := range matching(f.logs.Records(), gateway.OutcomeFailed, second) {
		if r.Level != slog.LevelWarn {
			t.Errorf("the second update's contended delivery was logged at %v, want WARN: %v", r.Level, r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"update 1", "update 2"}; !slices.Equal(applied, want) {
		t.Errorf("applied %v, want %v", applied, want)
	}
}

// TestDefaultInProgressDelay: with InProgressDelay left zero, a message
// whose handler meets a held Mutex is held DefaultInProgressDelay (the
// holder's lease ends later) before its nack, not nacked at once.
func TestDefaultInProgressDelay(t *testing.T) {
	f := newFixture(t, setup{})
	opts := &pull.Options{Logger: f.logger()}
	end := heldTimer(t, f.logs, opts)
	holding, finish := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- f.g.Mutex(context.Background(), "po:7", func(context.Context) error {
			close(holding)
			<-finish
			return nil
		})
	}()
	waitClosed(t, holding, "the test holding the order's Mutex")
	release := sync.OnceFunc(func() { close(finish) })
	t.Cleanup(release)
	stop := f.receive(f.sub, pull.Wrap(f.g, func(ctx context.Context, m *pubsub.Message) error {
		return f.g.Mutex(ctx, "po:"+m.Attributes["po_id"], func(context.Context) error { return nil })
	}, opts))
	id := f.publish("update", "po_id", "7")

	f.logs.Wait(t, waitFor, "a hold of the contended update", func(recs logtest.Records) bool { return len(holds(recs)) > 0 })
	if d, err := time.ParseDuration(holds(f.logs.Records())[0].Attrs["duration"]); err != nil || d != pull.DefaultInProgressDelay {
		t.Errorf("held for %v (%v), want DefaultInProgressDelay (%v): the Mutex holder's lease is %v", d, err, pull.DefaultInProgressDelay, gateway.DefaultRenewedLease)
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	end()
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	f.waitAcked(id)
	stop()
}
