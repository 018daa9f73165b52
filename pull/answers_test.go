package pull_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/answertable"
	"github.com/idemgate/idemgate/internal/claimwatch"
	"github.com/idemgate/idemgate/internal/pulltest"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// answerCase produces one row of docs/design.md's table of answers through
// a wrapped Receive callback, called directly with a message whose Ack
// and Nack are recorded (as TestFaultMatrix does), and returns the
// verdict: "ack" or "nack".
type answerCase struct {
	row     string
	produce func(t *testing.T) string
}

// answerGateway returns a gateway over st (nil: a fresh memstore), its log
// discarded.
func answerGateway(t *testing.T, st store.Store, o gateway.Options) *gateway.Gateway {
	t.Helper()
	if st == nil {
		var err error
		if st, err = memstore.New(nil); err != nil {
			t.Fatal(err)
		}
	}
	o.Logger = slog.New(slog.DiscardHandler)
	g, err := gateway.New(st, &o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// verdict delivers a message (id, data, attrs) to cb on ctx and returns
// "ack", "nack" or "" (neither), recovering a panic that follows the
// verdict.
func verdict(ctx context.Context, t *testing.T, cb func(context.Context, *pubsub.Message), id, data string, attrs map[string]string) (v string) {
	t.Helper()
	acks := &ackRecorder{}
	m, err := pulltest.Message(&pubsub.Message{ID: id, Data: []byte(data), Attributes: attrs}, acks)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		recover() // fn's panic goes on after the nack, as in any Receive callback
		switch acks.Verdict() {
		case "Ack":
			v = "ack"
		case "Nack":
			v = "nack"
		}
	}()
	cb(ctx, m)
	return v
}

func quietOptions(o pull.Options) *pull.Options {
	o.Logger = slog.New(slog.DiscardHandler)
	return &o
}

func succeed(context.Context, *pubsub.Message) error { return nil }

func conflicting(accept bool) func(t *testing.T) string {
	return func(t *testing.T) string {
		cb := pull.Wrap(answerGateway(t, nil, gateway.Options{}), succeed, quietOptions(pull.Options{
			Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload, AcceptConflicts: new(accept)},
		}))
		order := map[string]string{"order_id": "o-1"}
		if v := verdict(t.Context(), t, cb, "m-1", "x", order); v != "ack" {
			t.Fatalf("the first order: %q, want ack", v)
		}
		return verdict(t.Context(), t, cb, "m-2", "y", order)
	}
}

// failing delivers a message whose work fails for good (gateway.Permanent)
// deliveries times, under gateway options o, and returns the last verdict;
// the work must have run once.
func failing(o gateway.Options, deliveries int) func(t *testing.T) string {
	return func(t *testing.T) string {
		runs := 0
		cb := pull.Wrap(answerGateway(t, nil, o), func(context.Context, *pubsub.Message) error {
			runs++
			return gateway.Permanent(errors.New("customer gone"))
		}, quietOptions(pull.Options{}))
		var v string
		for range deliveries {
			v = verdict(t.Context(), t, cb, "m-1", "x", nil)
		}
		if runs != 1 {
			t.Errorf("the work ran %d times, want once", runs)
		}
		return v
	}
}

var answerCases = []answerCase{
	{"won", func(t *testing.T) string {
		return verdict(t.Context(), t, pull.Wrap(answerGateway(t, nil, gateway.Options{}), succeed, quietOptions(pull.Options{})), "m-1", "x", nil)
	}},
	{"duplicate", func(t *testing.T) string {
		cb := pull.Wrap(answerGateway(t, nil, gateway.Options{}), succeed, quietOptions(pull.Options{}))
		verdict(t.Context(), t, cb, "m-1", "x", nil)
		return verdict(t.Context(), t, cb, "m-1", "x", nil)
	}},
	{"in_progress", func(t *testing.T) string {
		g := answerGateway(t, nil, gateway.Options{})
		started, release := make(chan struct{}), make(chan struct{})
		held := make(chan time.Duration, 1)
		o := quietOptions(pull.Options{})
		pull.SetHoldTimer(o, func(d time.Duration) <-chan time.Time {
			held <- d
			c := make(chan time.Time, 1)
			c <- time.Time{}
			return c
		})
		cb := pull.Wrap(g, func(ctx context.Context, m *pubsub.Message) error {
			if m.Data[0] == 'f' { // the first copy holds the key
				close(started)
				<-release
			}
			return nil
		}, o)
		first := make(chan string, 1)
		go func() { first <- verdict(context.Background(), t, cb, "m-1", "first", nil) }()
		<-started
		v := verdict(t.Context(), t, cb, "m-1", "copy", nil)
		close(release)
		if f := <-first; f != "ack" {
			t.Errorf("the holder: %q, want ack", f)
		}
		select {
		case <-held:
		default:
			t.Error("the copy was nacked without waiting InProgressDelay")
		}
		return v
	}},
	{"failed", func(t *testing.T) string {
		cb := pull.Wrap(answerGateway(t, nil, gateway.Options{}), func(context.Context, *pubsub.Message) error { return errors.New("supplier down") }, quietOptions(pull.Options{}))
		return verdict(t.Context(), t, cb, "m-1", "x", nil)
	}},
	{"panic", func(t *testing.T) string {
		cb := pull.Wrap(answerGateway(t, nil, gateway.Options{}), func(context.Context, *pubsub.Message) error { panic("bug in fn") }, quietOptions(pull.Options{}))
		return verdict(t.Context(), t, cb, "m-1", "x", nil)
	}},
	{"abandoned", failing(gateway.Options{}, 1)},
	{"already_failed", failing(gateway.Options{}, 2)},
	{"failed_acked", failing(gateway.Options{AckFailed: true}, 2)},
	{"waited", func(t *testing.T) string {
		st, err := claimwatch.New()
		if err != nil {
			t.Fatal(err)
		}
		g := answerGateway(t, st, gateway.Options{WaitForHolder: time.Minute})
		started, release := make(chan struct{}), make(chan struct{})
		runs := 0
		cb := pull.Wrap(g, func(ctx context.Context, m *pubsub.Message) error {
			if runs++; runs == 1 {
				close(started)
				<-release
			}
			return nil
		}, quietOptions(pull.Options{}))
		first, copied := make(chan string, 1), make(chan string, 1)
		go func() { first <- verdict(context.Background(), t, cb, "m-1", "first", nil) }()
		<-started
		go func() { copied <- verdict(context.Background(), t, cb, "m-1", "copy", nil) }()
		<-st.Held() // the copy met the holder, and waits
		close(release)
		if f := <-first; f != "ack" {
			t.Errorf("the holder: %q, want ack", f)
		}
		v := <-copied
		if runs != 1 {
			t.Errorf("the work ran %d times, want once", runs)
		}
		return v
	}},
	{"conflict", conflicting(false)},
	{"conflict_accepted", conflicting(true)},
	{"no_key", func(t *testing.T) string {
		cb := pull.Wrap(answerGateway(t, nil, gateway.Options{}), succeed, quietOptions(pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}}))
		return verdict(t.Context(), t, cb, "m-1", "x", nil)
	}},
	{"store_error", func(t *testing.T) string {
		cb := pull.Wrap(answerGateway(t, unreachable{}, gateway.Options{}), succeed, quietOptions(pull.Options{}))
		return verdict(t.Context(), t, cb, "m-1", "x", nil)
	}},
	{"cancelled", func(t *testing.T) string {
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // Receive is stopping
		return verdict(ctx, t, pull.Wrap(answerGateway(t, nil, gateway.Options{}), succeed, quietOptions(pull.Options{})), "m-1", "x", nil)
	}},
}

// unreachable is a store that cannot be reached.
type unreachable struct{}

var errUnreachable = errors.New("dial tcp 10.0.0.3:6379: connect: connection refused")

func (unreachable) Claim(context.Context, string, time.Duration, store.ClaimOptions) (store.Claim, error) {
	return store.Claim{}, errUnreachable
}
func (unreachable) Complete(context.Context, store.Claim) (bool, error) { return false, errUnreachable }
func (unreachable) Release(context.Context, store.Claim) error          { return errUnreachable }

// TestAnswerTable holds the pull column of docs/design.md's table of
// answers: each row, produced through Wrap, gets the verdict the table
// says, and the table has a row for each case. A pulled message is never
// malformed, so the rejected row has no answer.
func TestAnswerTable(t *testing.T) {
	table, err := answertable.Read("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{"rejected": ""}
	for _, c := range answerCases {
		t.Run(c.row, func(t *testing.T) { got[c.row] = c.produce(t) })
	}
	if diff := cmp.Diff(table.Column("Pull"), got); diff != "" {
		t.Errorf("column Pull of docs/design.md's table (-doc +Wrap):\n%s", diff)
	}
}

// AckFailed acknowledges the deliveries of a FAILED key, and nothing else
// that failed: a handler's error, a missing key and a store that cannot
// be reached are still nacked.
func TestAckFailedAcksOnlyFailedKeys(t *testing.T) {
	o := gateway.Options{AckFailed: true}
	for name, cb := range map[string]func(*testing.T) func(context.Context, *pubsub.Message){
		"handler error": func(t *testing.T) func(context.Context, *pubsub.Message) {
			return pull.Wrap(answerGateway(t, nil, o), func(context.Context, *pubsub.Message) error { return errors.New("warehouse down") }, quietOptions(pull.Options{}))
		},
		"no key": func(t *testing.T) func(context.Context, *pubsub.Message) {
			return pull.Wrap(answerGateway(t, nil, o), succeed, quietOptions(pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}}))
		},
		"store error": func(t *testing.T) func(context.Context, *pubsub.Message) {
			return pull.Wrap(answerGateway(t, unreachable{}, o), succeed, quietOptions(pull.Options{}))
		},
	} {
		t.Run(name, func(t *testing.T) {
			if v := verdict(t.Context(), t, cb(t), "m-1", "x", nil); v != "nack" {
				t.Errorf("with AckFailed, %s: %q, want nack: only a FAILED key's deliveries are acked", name, v)
			}
		})
	}
}
