package pull_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/store"
)

// The tests below publish to pstest, receive with the real client, and read
// the verdict from pstest's bookkeeping: an ack is counted; a nack makes
// Pub/Sub deliver the message again.

func TestSuccessIsAckedOnceDone(t *testing.T) {
	f := newFixture(t, setup{})
	var runs counter
	id := f.publish("order 1")
	stop := f.receive(f.sub, pull.Wrap(f.g, func(ctx context.Context, m *pubsub.Message) error {
		runs.inc(m.ID)
		if c, ok := gateway.ClaimFromContext(ctx); !ok || c.Key != m.ID {
			t.Errorf("ClaimFromContext = %+v, %v; want the claim on the message ID", c, ok)
		}
		return nil
	}, &pull.Options{Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	f.waitAcked(id)
	stop()

	if got := runs.get(id); got != 1 {
		t.Errorf("fn ran %d times, want 1", got)
	}
	if d, a := f.message(id); d != 1 || a != 1 {
		t.Errorf("deliveries, acks = %d, %d; want 1, 1", d, a)
	}
	c, err := f.st.Claim(t.Context(), id, time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.AlreadyDone {
		t.Errorf("after success the key must be done: Claim = %v, %v", c.Status, err)
	}
	if want := "pull/" + id; c.Origin != want {
		t.Errorf("the record names %q as the delivery that did the work, want %q", c.Origin, want)
	}
}

func TestDuplicateIsAckedWithoutRunning(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order 1")
	if err := f.g.Lock(t.Context(), id, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		runs.Add(1)
		return nil
	}, &pull.Options{Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeDuplicate, id, 1)
	f.waitAcked(id)
	stop()
	if n := runs.Load(); n != 0 {
		t.Errorf("fn ran %d times for a done key, want 0", n)
	}
}

func TestFailureIsNackedAndRetried(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order 1")
	var runs counter
	stop := f.receive(f.sub, pull.Wrap(f.g, func(ctx context.Context, m *pubsub.Message) error {
		if runs.inc(m.ID) == 1 {
			return errors.New("supplier down")
		}
		return nil
	}, &pull.Options{Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	f.waitAcked(id)
	stop()

	if got := runs.get(id); got != 2 {
		t.Errorf("fn ran %d times, want 2 (a failure, then the redelivery)", got)
	}
	failed := matching(f.logs.Records(), gateway.OutcomeFailed, id)
	if len(failed) != 1 || failed[0].Level != slog.LevelError || failed[0].Attrs["error"] != "supplier down" {
		t.Errorf("want one ERROR line with fn's error for the failure, got %+v", failed)
	}
	if d, _ := f.message(id); d != 2 {
		t.Errorf("deliveries = %d, want 2", d)
	}
}

func TestPanicReleasesNacksAndPanics(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order 1")
	var runs counter
	wrapped := pull.Wrap(f.g, func(ctx context.Context, m *pubsub.Message) error {
		if runs.inc(m.ID) == 1 {
			panic("boom")
		}
		return nil
	}, &pull.Options{Logger: f.logger()})
	panics := make(chan any, 1)
	stop := f.receive(f.sub, func(ctx context.Context, m *pubsub.Message) {
		// A panic in a Receive callback ends the program; catch it here to
		// see that it went through.
		defer func() {
			if p := recover(); p != nil {
				panics <- p
			}
		}()
		wrapped(ctx, m)
	})
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	f.waitAcked(id)
	stop()

	select {
	case p := <-panics:
		if p != "boom" {
			t.Errorf("recovered %v, want fn's panic value", p)
		}
	default:
		t.Error("the panic did not reach the Receive callback")
	}
	if got := runs.get(id); got != 2 {
		t.Errorf("fn ran %d times, want 2: the panic must release the claim and nack", got)
	}
}

func TestGoexitNacks(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order 1")
	var runs counter
	stop := f.receive(f.sub, pull.Wrap(f.g, func(ctx context.Context, m *pubsub.Message) error {
		if runs.inc(m.ID) == 1 {
			runtime.Goexit()
		}
		return nil
	}, &pull.Options{Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	stop()
	if got := runs.get(id); got != 2 {
		t.Errorf("fn ran %d times, want 2: runtime.Goexit must release the claim and nack", got)
	}
}

func TestInProgressIsNackedWithWarning(t *testing.T) {
	f := newFixture(t, setup{deadLetterAfter: 100})
	id := f.publish("order 1")
	held, err := f.st.Claim(t.Context(), id, 30*time.Minute, store.ClaimOptions{}) // another delivery is working on it
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		runs.Add(1)
		return nil
	}, &pull.Options{Logger: f.logger(), Subscription: f.sub, InProgressDelay: time.Millisecond}))
	waitOutcome(t, f.logs, gateway.OutcomeInProgress, id, 2)
	if n := runs.Load(); n != 0 {
		t.Fatalf("fn ran %d times while another delivery held the key, want 0", n)
	}
	if err := f.st.Release(t.Context(), held); err != nil { // the holder gives up
		t.Fatal(err)
	}
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	f.waitAcked(id)
	stop()

	for i, r := range matching(f.logs.Records(), gateway.OutcomeInProgress, id)[:2] {
		want := map[string]string{
			"key":                       id,
			"delivery.subscription":     f.sub,
			"delivery.delivery_attempt": strconv.Itoa(i + 1),
		}
		for k, v := range want {
			if r.Attrs[k] != v {
				t.Errorf("in_progress line %d: %s = %q, want %q (line %v)", i, k, r.Attrs[k], v, r.Attrs)
			}
		}
		if r.Level != slog.LevelWarn {
			t.Errorf("in_progress line %d at %v, want WARN", i, r.Level)
		}
		if _, ok := r.Attrs["stack"]; ok {
			t.Errorf("in_progress line %d carries a stack trace; contention is healthy", i)
		}
	}
}

func TestInProgressHoldEndsWithTheHoldersLease(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order 1")
	// A holder that died: its lease ends soon, and nobody releases it.
	if _, err := f.st.Claim(t.Context(), id, 200*time.Millisecond, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error { return nil },
		&pull.Options{Logger: f.logger(), InProgressDelay: time.Hour}))
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	stop()
	if n := len(matching(f.logs.Records(), gateway.OutcomeInProgress, id)); n != 1 {
		t.Errorf("%d in_progress lines, want 1: the hold ends when the holder's lease does", n)
	}
}

func TestNoKeyFailsClosed(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order without id")
	var runs atomic.Int32
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		runs.Add(1)
		return nil
	}, &pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}, Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeNoKey, id, 2) // nacked, so delivered again
	stop()
	if n := runs.Load(); n != 0 {
		t.Errorf("fn ran %d times without a key, want 0 (fail closed)", n)
	}
	r := matching(f.logs.Records(), gateway.OutcomeNoKey, id)[0]
	if r.Level != slog.LevelError || r.Attrs["error"] != `the message has no "order_id" attribute` {
		t.Errorf("no_key line = %v %v; want ERROR with the key function's error", r.Level, r.Attrs)
	}
}

func TestNoKeyAllowUnguarded(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order without id")
	var runs atomic.Int32
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		runs.Add(1)
		return nil
	}, &pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), AllowUnguarded: new(true)}, Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeUnguarded, id, 1)
	f.waitAcked(id)
	stop()
	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
	if n := len(matching(f.logs.Records(), gateway.OutcomeUnguarded, id)); n != 1 {
		t.Errorf("%d unguarded lines, want 1", n)
	}
}

// A subscriber's Options.Route is merged over the Gateway's settings: one
// it leaves zero is the Gateway's, here its Key and AllowUnguarded.
func TestRouteInheritsTheGateway(t *testing.T) {
	f := newFixture(t, setup{})
	g, err := gateway.New(f.st, &gateway.Options{Key: gateway.KeyFromAttribute("order_id"), AllowUnguarded: true, Logger: f.logger()})
	if err != nil {
		t.Fatal(err)
	}
	id := f.publish("order without id")
	stop := f.receive(f.sub, pull.Wrap(g, func(context.Context, *pubsub.Message) error { return nil }, &pull.Options{Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeUnguarded, id, 1)
	f.waitAcked(id)
	stop()
}

func TestNoKeyDisabledGatewayPassesThrough(t *testing.T) {
	f := newFixture(t, setup{})
	g, err := gateway.New(f.st, &gateway.Options{Disabled: true, Logger: f.logger()})
	if err != nil {
		t.Fatal(err)
	}
	id := f.publish("order without id")
	stop := f.receive(f.sub, pull.Wrap(g, func(context.Context, *pubsub.Message) error { return nil },
		&pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}, Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeUnguarded, id, 1)
	f.waitAcked(id)
	stop()
}

func TestStoreErrorIsNacked(t *testing.T) {
	fs := &flakyStore{}
	f := newFixture(t, setup{store: fs})
	fs.Store = f.st
	fs.failing.Store(true)
	id := f.publish("order 1")
	var runs atomic.Int32
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		runs.Add(1)
		return nil
	}, &pull.Options{Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeStoreError, id, 2)
	if n := runs.Load(); n != 0 {
		t.Fatalf("fn ran %d times while the store was down, want 0", n)
	}
	fs.failing.Store(false)
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	f.waitAcked(id)
	stop()
	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
}

func TestHideKeys(t *testing.T) {
	f := newFixture(t, setup{hideKeys: true})
	id := f.publish("order 1", "email", "ann@example.com")
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error { return errors.New("no") },
		&pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("email")}})) // logs through the gateway's logger
	waitOutcome(t, f.logs, gateway.OutcomeFailed, id, 1)
	stop()
	r := matching(f.logs.Records(), gateway.OutcomeFailed, id)[0]
	if _, ok := r.Attrs["key"]; ok || len(r.Attrs["key_digest"]) != len("sha256:")+16 {
		t.Errorf("HideKeys: want a key_digest and no key, got %v", r.Attrs)
	}
}

func TestWrapPanicsOnNil(t *testing.T) {
	for name, call := range map[string]func(){
		"nil gateway": func() { pull.Wrap(nil, func(context.Context, *pubsub.Message) error { return nil }, nil) },
		"nil fn":      func() { pull.Wrap(&gateway.Gateway{}, nil, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				// A nil gateway would also panic later, on its first
				// use; the guard must catch it at Wrap, with a "pull: "
				// message that says what was wrong.
				r := recover()
				if p, _ := r.(string); !strings.HasPrefix(p, "pull: ") {
					t.Errorf("recovered %v, want a \"pull: …\" panic at Wrap", r)
				}
			}()
			call()
		})
	}
}

// flakyStore fails every Claim while failing is set.
type flakyStore struct {
	store.Store
	failing atomic.Bool
}

func (s *flakyStore) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	if s.failing.Load() {
		return store.Claim{}, errors.New("connection refused")
	}
	return s.Store.Claim(ctx, key, lease, opts)
}

// A handler whose own transaction was fenced out (a store's CompleteTx
// answered store.ErrFenced) wrote nothing; when the key's record is DONE
// (here: an earlier commit of the same transaction landed, its reply was
// lost) the message is acked, not redelivered.
func TestFencedOutTransactionIsAcked(t *testing.T) {
	f := newFixture(t, setup{})
	id := f.publish("order 1")
	stop := f.receive(f.sub, pull.Wrap(f.g, func(ctx context.Context, _ *pubsub.Message) error {
		c, _ := gateway.ClaimFromContext(ctx)
		if _, err := f.st.Complete(ctx, c); err != nil {
			return err
		}
		return fmt.Errorf("ledger insert: %w", store.ErrFenced)
	}, &pull.Options{Logger: f.logger()}))
	waitOutcome(t, f.logs, gateway.OutcomeFencedOut, id, 1)
	f.waitAcked(id)
	stop()
	if d, a := f.message(id); d != 1 || a != 1 {
		t.Errorf("deliveries, acks = %d, %d; want 1, 1", d, a)
	}
}

// With a Fingerprint on the route, an order_id reused for another payload is a
// conflict: nacked (so it reaches the dead-letter topic), or acked as a
// duplicate with AcceptConflicts; fn does not run for it.
func TestConflictIsNackedOrAccepted(t *testing.T) {
	for _, accept := range []bool{false, true} {
		t.Run(fmt.Sprint("AcceptConflicts=", accept), func(t *testing.T) {
			f := newFixture(t, setup{})
			var runs counter
			first := f.publish("2 chairs", "order_id", "7")
			stop := f.receive(f.sub, pull.Wrap(f.g, func(_ context.Context, m *pubsub.Message) error {
				runs.inc(m.ID)
				return nil
			}, &pull.Options{
				Route:  gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload, AcceptConflicts: new(accept)},
				Logger: f.logger(),
			}))
			waitOutcome(t, f.logs, gateway.OutcomeWon, first, 1)
			other := f.publish("9 tables", "order_id", "7")
			if accept {
				waitOutcome(t, f.logs, gateway.OutcomeConflict, other, 1)
				f.waitAcked(other)
			} else {
				waitOutcome(t, f.logs, gateway.OutcomeConflict, other, 2) // nacked, so delivered again
			}
			stop()
			if n := runs.get(other); n != 0 {
				t.Errorf("fn ran %d times for the conflicting order", n)
			}
		})
	}
}

// A Receive that stops cancels the callbacks in flight; a body that
// honours its context then fails, but that is the consumer's doing, not
// the message's: the attempt is not counted, even with MaxAttempts 1, and
// the redelivery after the restart runs the work.
func TestShutdownNotCountedAsAttempt(t *testing.T) {
	f := newFixture(t, setup{})
	g, err := gateway.New(f.st, &gateway.Options{Logger: f.logger(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := f.publish("order 1")
	started := make(chan struct{})
	stop := f.receive(f.sub, pull.Wrap(g, func(ctx context.Context, m *pubsub.Message) error {
		close(started)
		<-ctx.Done()
		return fmt.Errorf("supplier call: %w", ctx.Err())
	}, &pull.Options{Logger: f.logger()}))
	<-started
	stop() // the deploy: Receive stops, and cancels the callback
	if r, _, _ := f.st.Inspect(t.Context(), id); r.State == store.Failed || r.Attempts != 0 {
		t.Fatalf("record after the shutdown = %v with %d attempts; want released, the shutdown not counted", r.State, r.Attempts)
	}
	var runs atomic.Int32
	f.receive(f.sub, pull.Wrap(g, func(context.Context, *pubsub.Message) error { runs.Add(1); return nil }, &pull.Options{Logger: f.logger()}))
	f.waitAcked(id)
	if runs.Load() != 1 {
		t.Errorf("the work ran %d times after the restart, want once", runs.Load())
	}
}
