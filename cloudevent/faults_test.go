package cloudevent_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/fakeclock"
	"github.com/idemgate/idemgate/internal/faultmatrix"
	"github.com/idemgate/idemgate/internal/faultstore"
	"github.com/idemgate/idemgate/store/memstore"
)

// matrixLease is the gateway's lease in the fault matrix. The framework
// serves over real sockets, which testing/synctest cannot wait on, so the
// gateway renews on the real clock, every third of this; the store's clock
// is fake and only moves when the matrix advances it.
const matrixLease = 600 * time.Millisecond

// TestFaultMatrix runs wrapped CloudEvent functions through the fault
// matrix, each delivery through the real functions-framework-go stack
// (framework_test.go) as an Eventarc binary-mode event.
func TestFaultMatrix(t *testing.T) {
	const key = "m-1"
	faultmatrix.Run(t, faultmatrix.Surface{
		Behaviours: []faultmatrix.Behaviour{
			faultmatrix.OK, faultmatrix.Error, faultmatrix.Non2xx, faultmatrix.Panic, faultmatrix.Outlives,
		},
		SlowDelay:     matrixLease / 20,
		SparseOverlap: true,
		Cell: func(t *testing.T, delay time.Duration, test func(*testing.T, *faultmatrix.Harness)) {
			clk := fakeclock.New()
			mem, err := memstore.New(&memstore.Options{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			g, st, log := faultmatrix.NewGateway(t, mem, delay, gateway.Options{Lease: matrixLease})
			d := &ceDriver{t: t, key: key, deliveries: map[string]*ceDelivery{}}
			d.base = serveFunction(t, d.observe(cloudevent.Wrap(g, d.function, nil)))
			test(t, &faultmatrix.Harness{
				Store: st, Key: key, Lease: matrixLease, Log: log,
				Deliver:      d.deliver,
				Advance:      clk.Advance,
				AwaitRenewal: func() { awaitRenewal(st) },
				Patience:     10 * time.Second,
			})
		},
		// Wrap's documented behaviour: fn's panic goes on once the claim is
		// released; functions-framework recovers it and answers 500.
		PanicAllowed: func(b faultmatrix.Behaviour, p any) bool { return b.Panics() && p == faultmatrix.PanicValue },
	})
}

// awaitRenewal waits until an Extend that started after the call has
// ended, for at most a few leases: renewal happens every third of the
// lease. A renewal that never comes is not waited for; the matrix then
// sees what its absence does.
func awaitRenewal(st *faultstore.Store) {
	started, _ := st.Calls(faultstore.Extend)
	ctx, cancel := context.WithTimeout(context.Background(), 2*matrixLease)
	defer cancel()
	st.AwaitEnded(ctx, faultstore.Extend, started+1)
}

// deliveryExt is the CloudEvents extension that tells the function which of
// the driver's deliveries an event is.
const deliveryExt = "fmdelivery"

// ceDriver sends events to one framework slot and tells the function, per
// delivery, how to behave.
type ceDriver struct {
	t    *testing.T
	key  string
	base string // the slot's URL

	mu         sync.Mutex // guards the fields below
	next       int
	deliveries map[string]*ceDelivery
}

// ceDelivery is one event in flight.
type ceDelivery struct {
	b     faultmatrix.Behaviour
	body  *faultmatrix.Body
	done  chan struct{} // closed when the wrapped function has returned or panicked
	panic any           // what came out of the wrapped function
}

// deliver sends one event on ctx and waits until the wrapped function has
// finished with it, so that its claim is settled. A 2xx answer is an ack;
// anything else, or no answer (the caller went away), is a nack.
func (d *ceDriver) deliver(ctx context.Context, b faultmatrix.Behaviour, body *faultmatrix.Body) faultmatrix.Outcome {
	d.mu.Lock()
	d.next++
	id := strconv.Itoa(d.next)
	dl := &ceDelivery{b: b, body: body, done: make(chan struct{})}
	d.deliveries[id] = dl
	d.mu.Unlock()

	r := binaryRequest(d.base, message{id: d.key, data: "order 1"})
	r.Header.Set("Ce-"+deliveryExt, id)
	code, _, err := send(ctx, r)
	select {
	case <-dl.done:
	case <-time.After(10 * time.Second):
		d.t.Errorf("delivery %s: the wrapped function did not finish", id)
	}
	o := faultmatrix.Outcome{Panic: dl.panic}
	switch {
	case err != nil:
		o.Detail = "no answer: " + err.Error()
	case code >= 200 && code <= 299:
		o.Acked, o.Detail = true, strconv.Itoa(code)
	default:
		o.Detail = strconv.Itoa(code)
	}
	if dl.panic != nil {
		o.Detail += fmt.Sprintf(", after panic %v", dl.panic)
	}
	return o
}

func (d *ceDriver) delivery(e event.Event) *ceDelivery {
	id := fmt.Sprint(e.Extensions()[deliveryExt])
	d.mu.Lock()
	defer d.mu.Unlock()
	dl := d.deliveries[id]
	if dl == nil {
		panic("faults_test: an event without a known " + deliveryExt + " extension: " + id)
	}
	return dl
}

// observe notes what comes out of wrapped, and when, for each delivery; a
// panic goes on to the framework.
func (d *ceDriver) observe(wrapped func(context.Context, event.Event) error) func(context.Context, event.Event) error {
	return func(ctx context.Context, e event.Event) error {
		dl := d.delivery(e)
		defer close(dl.done)
		defer func() {
			if p := recover(); p != nil {
				dl.panic = p
				panic(p)
			}
		}()
		return wrapped(ctx, e)
	}
}

// function is the CloudEvent function under the guard.
func (d *ceDriver) function(ctx context.Context, e event.Event) error {
	dl := d.delivery(e)
	defer dl.body.Enter(ctx)()
	switch dl.b {
	case faultmatrix.OK, faultmatrix.Outlives:
		return nil
	case faultmatrix.Error:
		return errors.New("supplier down")
	case faultmatrix.Non2xx:
		return cehttp.NewResult(http.StatusServiceUnavailable, "supplier down")
	case faultmatrix.Panic:
		panic(faultmatrix.PanicValue)
	}
	panic("faults_test: no CloudEvent function for behaviour " + string(dl.b))
}
