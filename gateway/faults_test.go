package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/faultmatrix"
	"github.com/idemgate/idemgate/pushenvelope"
)

// TestFaultMatrix runs the HTTP push surface (Idempotent, and Push for the
// error row) through the fault matrix. Each cell runs in a synctest bubble
// over a renewing memstore: time is fake, so leases lapse without waiting.
// net/http's server does not run in a bubble, so the handler is called
// directly; a panic(http.ErrAbortHandler) coming out of it is what the
// server turns into an aborted connection, a nack.
func TestFaultMatrix(t *testing.T) {
	const key = "m-1"
	body := push(key, nil, "order 1")
	faultmatrix.Run(t, faultmatrix.Surface{
		Behaviours: []faultmatrix.Behaviour{
			faultmatrix.OK, faultmatrix.Error, faultmatrix.Non2xx, faultmatrix.Panic,
			faultmatrix.PanicAfter2xx, faultmatrix.FlushThenPanic, faultmatrix.Outlives,
		},
		SlowDelay: gateway.DefaultRenewedLease / 20,
		Cell: func(t *testing.T, delay time.Duration, test func(*testing.T, *faultmatrix.Harness)) {
			synctest.Test(t, func(t *testing.T) {
				g, st, log := faultmatrix.NewGateway(t, nil, delay, gateway.Options{Lease: gateway.DefaultRenewedLease})
				d := &pushDriver{g: g, body: body}
				test(t, &faultmatrix.Harness{
					Store: st, Key: key, Lease: gateway.DefaultRenewedLease, Log: log,
					Deliver: d.deliver, Advance: time.Sleep, Patience: time.Hour,
				})
			})
		},
		// net/http's documented way to abort a response, and nothing else.
		PanicAllowed: func(_ faultmatrix.Behaviour, p any) bool { return p == http.ErrAbortHandler },
	})
}

// pushDriver delivers push requests straight to the gateway's handlers.
type pushDriver struct {
	g    *gateway.Gateway
	body string
}

// deliver serves one push request whose context is ctx and reads the
// verdict the client would see: a 2xx status it received is an ack; an
// aborted connection, a non-2xx status, or a client that had gone before
// the answer is a nack.
func (d *pushDriver) deliver(ctx context.Context, b faultmatrix.Behaviour, body *faultmatrix.Body) (o faultmatrix.Outcome) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader(d.body))
	defer func() {
		if p := recover(); p != nil {
			o = faultmatrix.Outcome{Panic: p, Detail: fmt.Sprintf("panic %v", p)}
			if p == http.ErrAbortHandler {
				o.Detail = "connection aborted"
			}
		}
	}()
	d.handler(b, body).ServeHTTP(rec, r)
	switch {
	case ctx.Err() != nil:
		return faultmatrix.Outcome{Detail: fmt.Sprintf("%d to a client that had gone", rec.Code)}
	case rec.Code >= 200 && rec.Code <= 299:
		return faultmatrix.Outcome{Acked: true, Detail: fmt.Sprint(rec.Code)}
	}
	return faultmatrix.Outcome{Detail: fmt.Sprint(rec.Code)}
}

// handler is the guarded handler behaving as b.
func (d *pushDriver) handler(b faultmatrix.Behaviour, body *faultmatrix.Body) http.Handler {
	if b == faultmatrix.Error {
		return d.g.Push(func(ctx context.Context, _ *pushenvelope.Message) error {
			defer body.Enter(ctx)()
			return errors.New("supplier down")
		})
	}
	return d.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer body.Enter(r.Context())()
		switch b {
		case faultmatrix.OK, faultmatrix.Outlives:
			w.WriteHeader(http.StatusOK)
		case faultmatrix.Non2xx:
			http.Error(w, "supplier down", http.StatusBadGateway)
		case faultmatrix.Panic:
			panic(faultmatrix.PanicValue)
		case faultmatrix.PanicAfter2xx:
			w.WriteHeader(http.StatusOK)
			panic(faultmatrix.PanicValue)
		case faultmatrix.FlushThenPanic:
			w.Write([]byte("partial answer"))
			if err := http.NewResponseController(w).Flush(); err != nil {
				panic(err)
			}
			panic(faultmatrix.PanicValue)
		default:
			panic("faults_test: no HTTP handler for behaviour " + string(b))
		}
	}))
}
