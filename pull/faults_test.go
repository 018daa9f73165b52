package pull_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/faultmatrix"
	"github.com/idemgate/idemgate/internal/pulltest"
	"github.com/idemgate/idemgate/pull"
)

// TestFaultMatrix runs the pull surface through the fault matrix. Each cell
// runs in a synctest bubble over a renewing memstore, and calls the Receive
// callback directly with a message whose Ack and Nack are recorded: the
// pubsub client and pstest talk over real sockets, which a bubble cannot
// wait on.
func TestFaultMatrix(t *testing.T) {
	const key = "m-1"
	faultmatrix.Run(t, faultmatrix.Surface{
		Behaviours: []faultmatrix.Behaviour{
			faultmatrix.OK, faultmatrix.Error, faultmatrix.Panic, faultmatrix.Outlives,
		},
		SlowDelay: gateway.DefaultRenewedLease / 20,
		Cell: func(t *testing.T, delay time.Duration, test func(*testing.T, *faultmatrix.Harness)) {
			synctest.Test(t, func(t *testing.T) {
				g, st, log := faultmatrix.NewGateway(t, nil, delay, gateway.Options{Lease: gateway.DefaultRenewedLease})
				d := &pullDriver{t: t, g: g, key: key}
				test(t, &faultmatrix.Harness{
					Store: st, Key: key, Lease: gateway.DefaultRenewedLease, Log: log,
					Deliver: d.deliver, Advance: time.Sleep, Patience: time.Hour,
				})
			})
		},
		// Wrap's documented behaviour: fn's panic goes on, as in any Receive
		// callback, once the claim was released and the message nacked
		// (deliver reports a panic that escaped before the nack otherwise).
		PanicAllowed: func(b faultmatrix.Behaviour, p any) bool { return b.Panics() && p == faultmatrix.PanicValue },
	})
}

// pullDriver calls a wrapped Receive callback directly.
type pullDriver struct {
	t   *testing.T
	g   *gateway.Gateway
	key string
}

// deliver calls the callback with a fresh message on ctx (cancelled: Receive
// is stopping) and reads the verdict from the message: Ack is an ack; Nack,
// or neither (the message waits out its ack deadline), is a nack.
func (d *pullDriver) deliver(ctx context.Context, b faultmatrix.Behaviour, body *faultmatrix.Body) (o faultmatrix.Outcome) {
	acks := &ackRecorder{}
	m := newMessage(d.t, d.key, acks)
	cb := pull.Wrap(d.g, func(ctx context.Context, _ *pubsub.Message) error {
		defer body.Enter(ctx)()
		switch b {
		case faultmatrix.OK, faultmatrix.Outlives:
			return nil
		case faultmatrix.Error:
			return errors.New("supplier down")
		case faultmatrix.Panic:
			panic(faultmatrix.PanicValue)
		}
		panic("faults_test: no pull handler for behaviour " + string(b))
	}, nil)
	defer func() {
		verdict := acks.Verdict()
		o = faultmatrix.Outcome{Acked: verdict == "Ack", Detail: verdict}
		if p := recover(); p != nil {
			o.Panic, o.Detail = p, fmt.Sprintf("%s, then panic %v", verdict, p)
			if verdict != "Nack" {
				o.Panic = fmt.Sprintf("%v (escaped before the message was nacked)", p)
			}
		}
	}()
	cb(ctx, m)
	return o
}

// ackRecorder notes a message's first Ack or Nack.
type ackRecorder = pulltest.Acks

// newMessage returns a message whose Ack and Nack go to acks.
func newMessage(t *testing.T, id string, acks *ackRecorder) *pubsub.Message {
	t.Helper()
	m, err := pulltest.Message(&pubsub.Message{ID: id, Data: []byte("order 1")}, acks)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
