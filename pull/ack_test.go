package pull_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
)

// exactlyOnce is a subscription with exactly-once delivery, which pstest
// models: acks are confirmed, and a failed ack is reported to the client.
func exactlyOnce() *pubsubpb.Subscription {
	return &pubsubpb.Subscription{EnableExactlyOnceDelivery: true}
}

// onAcknowledge is a pstest reactor for the Acknowledge RPC.
func onAcknowledge(fn func(*pubsubpb.AcknowledgeRequest) (bool, any, error)) pstest.ServerReactorOption {
	return pstest.ServerReactorOption{FuncName: "Acknowledge", Reactor: reactorFunc(func(req any) (bool, any, error) {
		return fn(req.(*pubsubpb.AcknowledgeRequest))
	})}
}

// ackLines returns the log lines about acks and nacks that did not succeed.
func ackLines(recs logtest.Records) logtest.Records {
	var out logtest.Records
	for _, r := range recs {
		if strings.Contains(r.Message, "ack failed") || strings.Contains(r.Message, "ack not confirmed") {
			out = append(out, r)
		}
	}
	return out
}

func TestExactlyOnceWaitsForTheAck(t *testing.T) {
	acked := make(chan struct{})
	var once sync.Once
	f := newFixture(t, setup{sub: exactlyOnce(), reactors: []pstest.ServerReactorOption{
		onAcknowledge(func(*pubsubpb.AcknowledgeRequest) (bool, any, error) {
			once.Do(func() { close(acked) })
			return false, nil, nil
		}),
	}})
	id := f.publish("order 1")
	wrapped := pull.Wrap(f.g, func(context.Context, *pubsub.Message) error { return nil }, &pull.Options{Logger: f.logger()})
	returned := make(chan bool, 1)
	stop := f.receive(f.sub, func(ctx context.Context, m *pubsub.Message) {
		wrapped(ctx, m)
		select {
		case <-acked:
			returned <- true
		default:
			returned <- false
		}
	})
	var afterAck bool
	select {
	case afterAck = <-returned:
	case <-time.After(waitFor):
		t.Fatalf("the callback did not return\n%s", f.logs.Records())
	}
	f.waitAcked(id)
	stop()
	if !afterAck {
		t.Error("with exactly-once delivery the callback must wait until Pub/Sub has answered the ack")
	}
	if lines := ackLines(f.logs.Records()); len(lines) > 0 {
		t.Errorf("a confirmed ack must not be logged, got %v", lines)
	}
}

// TestExactlyOnceFailedAck: Pub/Sub refuses the ack of a processed message.
// The failure is logged with its status, the message comes back after its
// ack deadline, and the gateway answers duplicate.
func TestExactlyOnceFailedAck(t *testing.T) {
	var calls atomic.Int32
	f := newFixture(t, setup{sub: exactlyOnce(), reactors: []pstest.ServerReactorOption{
		onAcknowledge(func(*pubsubpb.AcknowledgeRequest) (bool, any, error) {
			if calls.Add(1) == 1 {
				return true, nil, status.Error(codes.FailedPrecondition, "subscription is being updated")
			}
			return false, nil, nil
		}),
	}})
	id := f.publish("order 1")
	var runs atomic.Int32
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		runs.Add(1)
		return nil
	}, &pull.Options{Logger: f.logger()}))
	f.logs.Wait(t, waitFor, "a failed ack line", func(recs logtest.Records) bool { return len(ackLines(recs)) > 0 })
	f.advance(pastAckDeadline)
	waitOutcome(t, f.logs, gateway.OutcomeDuplicate, id, 1)
	f.waitAcked(id)
	stop()

	if n := runs.Load(); n != 1 {
		t.Errorf("fn ran %d times, want 1", n)
	}
	// The duplicate's ack may still be unconfirmed when stop ends Receive:
	// that DEBUG line is shutdown's, not a failure.
	lines := ackLines(f.logs.Records()).Level(slog.LevelWarn)
	if len(lines) != 1 {
		t.Fatalf("want one failed-ack line, got %v", lines)
	}
	r := lines[0]
	if r.Attrs["ack_status"] != "failed_precondition" || r.Attrs["key"] != id ||
		!strings.Contains(r.Message, "duplicate") {
		t.Errorf("failed ack line = %v %q %v; want WARN, ack_status failed_precondition, the key, and what happens next", r.Level, r.Message, r.Attrs)
	}
}

// TestExactlyOnceAckTimeout: Pub/Sub does not answer the ack within
// AckTimeout. The callback stops waiting and says so.
func TestExactlyOnceAckTimeout(t *testing.T) {
	blocked, unblock := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	f := newFixture(t, setup{sub: exactlyOnce(), reactors: []pstest.ServerReactorOption{
		onAcknowledge(func(*pubsubpb.AcknowledgeRequest) (bool, any, error) {
			if calls.Add(1) == 1 {
				close(blocked)
				<-unblock
			}
			return false, nil, nil
		}),
	}})
	release := sync.OnceFunc(func() { close(unblock) })
	t.Cleanup(release)
	id := f.publish("order 1")
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error { return nil },
		&pull.Options{Logger: f.logger(), AckTimeout: 50 * time.Millisecond}))
	waitClosed(t, blocked, "ack")
	f.logs.Wait(t, waitFor, "an unconfirmed ack line", func(recs logtest.Records) bool { return len(ackLines(recs)) > 0 })
	release()
	f.waitAcked(id)
	stop()

	r := ackLines(f.logs.Records())[0]
	if r.Level != slog.LevelWarn || r.Attrs["reason"] != "no result within AckTimeout" || r.Attrs["ack_timeout_ms"] != "50" ||
		!strings.HasPrefix(r.Message, "idemgate: ack not confirmed; ") || r.Attrs["acked_outcome"] != string(gateway.OutcomeWon) {
		t.Errorf("unconfirmed ack line = %v %q %v; want WARN, the reason, the timeout, and the acked outcome (won) with what its redelivery meets", r.Level, r.Message, r.Attrs)
	}
}

// TestExactlyOnceFailedNack: the nack of a failed message is refused; the
// message still comes back, when its ack deadline passes.
func TestExactlyOnceFailedNack(t *testing.T) {
	var nacks atomic.Int32
	f := newFixture(t, setup{sub: exactlyOnce(), reactors: []pstest.ServerReactorOption{{
		FuncName: "ModifyAckDeadline",
		Reactor: reactorFunc(func(req any) (bool, any, error) {
			if req.(*pubsubpb.ModifyAckDeadlineRequest).AckDeadlineSeconds == 0 && nacks.Add(1) == 1 {
				return true, nil, status.Error(codes.PermissionDenied, "no")
			}
			return false, nil, nil
		}),
	}}})
	id := f.publish("order 1")
	var runs atomic.Int32
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error {
		if runs.Add(1) == 1 {
			return errors.New("supplier down")
		}
		return nil
	}, &pull.Options{Logger: f.logger()}))
	f.logs.Wait(t, waitFor, "a failed nack line", func(recs logtest.Records) bool { return len(ackLines(recs)) > 0 })
	f.advance(pastAckDeadline)
	waitOutcome(t, f.logs, gateway.OutcomeWon, id, 1)
	f.waitAcked(id)
	stop()

	r := ackLines(f.logs.Records())[0]
	if r.Level != slog.LevelWarn || r.Attrs["ack_status"] != "permission_denied" || !strings.Contains(r.Message, "nack failed") {
		t.Errorf("failed nack line = %v %q %v", r.Level, r.Message, r.Attrs)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("fn ran %d times, want 2", n)
	}
}

// TestNegativeAckTimeoutDoesNotWait: with AckTimeout < 0 the callback acks
// and returns; a failed ack goes unnoticed.
func TestNegativeAckTimeoutDoesNotWait(t *testing.T) {
	var calls atomic.Int32
	refused := make(chan struct{})
	f := newFixture(t, setup{sub: exactlyOnce(), reactors: []pstest.ServerReactorOption{
		onAcknowledge(func(*pubsubpb.AcknowledgeRequest) (bool, any, error) {
			if calls.Add(1) == 1 {
				close(refused)
				return true, nil, status.Error(codes.FailedPrecondition, "no")
			}
			return false, nil, nil
		}),
	}})
	id := f.publish("order 1")
	stop := f.receive(f.sub, pull.Wrap(f.g, func(context.Context, *pubsub.Message) error { return nil },
		&pull.Options{Logger: f.logger(), AckTimeout: -1}))
	waitClosed(t, refused, "ack")
	f.advance(pastAckDeadline)
	waitOutcome(t, f.logs, gateway.OutcomeDuplicate, id, 1)
	f.waitAcked(id)
	stop()
	if lines := ackLines(f.logs.Records()); len(lines) > 0 {
		t.Errorf("AckTimeout < 0 must not log ack results, got %v", lines)
	}
}

// TestFailedAckSaysWhatTheRedeliveryDoes: the line about a failed ack says
// what the redelivery will meet, which depends on the outcome that was
// acked: only a done key answers it as a duplicate.
func TestFailedAckSaysWhatTheRedeliveryDoes(t *testing.T) {
	type run struct {
		f    *fixture
		g    *gateway.Gateway
		opts *pull.Options
	}
	for _, tc := range []struct {
		outcome gateway.Outcome
		// prepare readies the run, publishes the message and returns its
		// ID and handler.
		prepare func(t *testing.T, r *run) (string, func(context.Context, *pubsub.Message) error)
		want    string
	}{
		{gateway.OutcomeWon, func(t *testing.T, r *run) (string, func(context.Context, *pubsub.Message) error) {
			return r.f.publish("order 1"), func(context.Context, *pubsub.Message) error { return nil }
		}, "the key is done, so the gateway answers it as a duplicate"},
		{gateway.OutcomeDuplicate, func(t *testing.T, r *run) (string, func(context.Context, *pubsub.Message) error) {
			id := r.f.publish("order 1")
			if err := r.g.Lock(t.Context(), id, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			return id, func(context.Context, *pubsub.Message) error { return nil }
		}, "the key is done, so the gateway answers it as a duplicate"},
		{gateway.OutcomeConflict, func(t *testing.T, r *run) (string, func(context.Context, *pubsub.Message) error) {
			r.opts.Route = gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload, AcceptConflicts: new(true)}
			// The order was done for another payload.
			first := &pushenvelope.Message{Data: []byte("2 chairs"), Attributes: map[string]string{"order_id": "7"}}
			key, err := r.opts.Route.Key(first)
			if err != nil {
				t.Fatal(err)
			}
			fp, err := gateway.FingerprintPayload(first)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.g.Lock(gateway.WithFingerprint(t.Context(), fp), key, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			return r.f.publish("9 tables", "order_id", "7"), func(context.Context, *pubsub.Message) error { return nil }
		}, "the key is done for another payload, so the gateway accepts it as a duplicate again"},
		{gateway.OutcomeFencedOut, func(t *testing.T, r *run) (string, func(context.Context, *pubsub.Message) error) {
			return r.f.publish("order 1"), func(ctx context.Context, _ *pubsub.Message) error {
				c, _ := gateway.ClaimFromContext(ctx)
				if _, err := r.f.st.Complete(ctx, c); err != nil {
					return err
				}
				return fmt.Errorf("ledger insert: %w", store.ErrFenced)
			}
		}, "another claim took the key over, so the gateway answers it as in progress while that holder works, then as a duplicate"},
		{gateway.OutcomeCompleteError, func(t *testing.T, r *run) (string, func(context.Context, *pubsub.Message) error) {
			fs := &failingComplete{Store: r.f.st}
			g, err := gateway.New(fs, &gateway.Options{Logger: r.f.logger(), SettleTimeout: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			r.g = g
			return r.f.publish("order 1"), func(context.Context, *pubsub.Message) error { return nil }
		}, "the key was not recorded as done, so once the claim's lease ends it may run the work again"},
		{gateway.OutcomeUnguarded, func(t *testing.T, r *run) (string, func(context.Context, *pubsub.Message) error) {
			r.opts.Route = gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), AllowUnguarded: new(true)}
			return r.f.publish("order without id"), func(context.Context, *pubsub.Message) error { return nil }
		}, "the message ran unguarded, so it runs the work again, unguarded"},
	} {
		t.Run(string(tc.outcome), func(t *testing.T) {
			var target atomic.Value // the message ID whose first ack fails
			target.Store("")
			var failed atomic.Bool
			f := newFixture(t, setup{sub: exactlyOnce(), reactors: []pstest.ServerReactorOption{
				onAcknowledge(func(req *pubsubpb.AcknowledgeRequest) (bool, any, error) {
					for _, a := range req.AckIds {
						if id := target.Load().(string); id != "" && strings.HasPrefix(a, id+":") && failed.CompareAndSwap(false, true) {
							return true, nil, status.Error(codes.FailedPrecondition, "subscription is being updated")
						}
					}
					return false, nil, nil
				}),
			}})
			r := &run{f: f, g: f.g, opts: &pull.Options{Logger: f.logger()}}
			id, fn := tc.prepare(t, r)
			target.Store(id)
			stop := f.receive(f.sub, pull.Wrap(r.g, fn, r.opts))
			waitOutcome(t, f.logs, tc.outcome, id, 1)
			f.logs.Wait(t, waitFor, "a failed ack line", func(recs logtest.Records) bool { return len(ackLines(recs)) > 0 })
			stop()

			lines := ackLines(f.logs.Records())
			if len(lines) != 1 {
				t.Fatalf("want one failed-ack line, got %v", lines)
			}
			if r := lines[0]; r.Level != slog.LevelWarn || !strings.Contains(r.Message, "ack failed; Pub/Sub will redeliver the message: ") ||
				!strings.Contains(r.Message, tc.want) || r.Attrs["acked_outcome"] != string(tc.outcome) {
				t.Errorf("failed ack line after %s = %v %q %v; want WARN, saying %q, with the acked outcome", tc.outcome, r.Level, r.Message, r.Attrs, tc.want)
			}
		})
	}
}

// failingComplete is a store whose Complete always fails.
type failingComplete struct{ store.Store }

func (s *failingComplete) Complete(context.Context, store.Claim) (bool, error) {
	return false, errors.New("connection reset")
}
