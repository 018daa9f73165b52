package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/pushenvelope"
)

// Idempotent wraps h, a handler of Pub/Sub push deliveries, so that its
// work runs at most once per key: each POST is decoded (h finds the
// Message with pushenvelope.FromContext), keyed with the route's Key and
// run under Lock. h's status is the verdict: it should answer non-2xx when
// its work failed. GET, HEAD and OPTIONS without a body go to h untouched,
// so h may be a whole mux with health checks (wrap a mux only if all its
// POST routes receive pushes); other requests get 405. The answers:
//
//	h answered 2xx, or wrote nothing   h's answer     ack; the key is done
//	the key is already done            204            ack
//	a live holder owns the key         503            nack, retried later
//	h answered non-2xx, or panicked    h's, or 500    nack; the claim is released
//	the store failed                   503            nack
//	not a push delivery                400 (413 over MaxBodyBytes)
//	no key                             500            nack, unless AllowUnguarded
//	key reused for another payload     409            nack, or 204 with AcceptConflicts
//	the work failed for good           422, or h's    nack, or 204 with AckFailed
//
// h's answer is held until the claim is settled, so that a 2xx reaches
// Pub/Sub only once the key is done: a non-2xx after a first 2xx is the
// answer, 1xx answers are dropped, only the first 4 KiB of the body are
// sent, and Hijack fails (docs/design.md, "The push middleware's hold").
func (g *Gateway) Idempotent(h http.Handler) http.Handler {
	if h == nil {
		panic("gateway: Idempotent with a nil handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, h, func(ctx context.Context, rec *recorder, _ *pushenvelope.Message) error {
			h.ServeHTTP(rec, r.WithContext(ctx))
			if rec.status != 0 && !is2xx(rec.status) {
				return statusError{rec.status, rec.after, rec.body[rec.failedAt:]}
			}
			return nil
		})
	})
}

// Push returns a handler that runs fn on each push delivery under the guard
// of Idempotent: fn's nil answers 200 (ack), an error 500 (nack), except
// that a fenced-out transaction answers as Lock returns (see Lock).
// Requests other than POST get 405.
func (g *Gateway) Push(fn func(ctx context.Context, m *pushenvelope.Message) error) http.Handler {
	if fn == nil {
		panic("gateway: Push with a nil function")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, nil, func(ctx context.Context, _ *recorder, m *pushenvelope.Message) error {
			return fn(ctx, m)
		})
	})
}

// statusError is the error a wrapped handler's non-2xx answer becomes, so
// that Lock releases the claim. after is the 2xx it set first, if it did;
// body is what it wrote with the failure (held, so at most maxHeldBody
// bytes), the cause an operator needs: not what it wrote under a 2xx
// before, which may be anything and is never logged.
type statusError struct {
	code, after int
	body        []byte
}

// busy reports whether the handler asked for a retry because it is busy
// (503, 429): contention, not an incident.
func (e statusError) busy() bool {
	return e.code == http.StatusServiceUnavailable || e.code == http.StatusTooManyRequests
}

func (e statusError) Error() string {
	if e.after != 0 {
		return "handler answered " + strconv.Itoa(e.code) + " after " + strconv.Itoa(e.after)
	}
	return "handler answered " + strconv.Itoa(e.code)
}

// serve is the HTTP adapter: it decodes the delivery, resolves its key,
// runs work under the guard and answers the outcome. work answers through
// rec, which holds its answer until the claim is settled: completed before
// a 2xx goes out, released before a failure does. GET, HEAD and OPTIONS
// without a body go to pass untouched, or get 405 without one; with a body
// they get 405.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, pass http.Handler, work func(context.Context, *recorder, *pushenvelope.Message) error) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if hasBody(r) {
			g.refuseBody(w, r)
			return
		}
		if pass != nil {
			pass.ServeHTTP(w, r) // never a push delivery: health checks and the like
			return
		}
		fallthrough
	default:
		w.Header().Set("Allow", allowed(pass))
		http.Error(w, "idemgate: push deliveries are POSTed", http.StatusMethodNotAllowed)
		return
	}
	d := Delivery{Path: r.URL.Path}
	ctx := r.Context()
	m, err := pushenvelope.Decode(r, g.opts.MaxBodyBytes)
	if err != nil {
		// The line of a refused request keeps what it still says of itself.
		var body []byte
		if errors.Is(err, pushenvelope.ErrNotPush) { // Decode put the body back, in memory
			body, _ = io.ReadAll(r.Body)
		}
		d.Invalid, d.Message = err, pushenvelope.Identify(r.Header, body)
		d.Form = d.Message.Form.String()
	} else {
		ctx = pushenvelope.NewContext(ctx, m)
		d.Message, d.Form = m, m.Form.String()
	}
	rec := &recorder{ResponseWriter: w}
	res := g.deliver(ctx, &d, func(ctx context.Context) error { return work(ctx, rec, m) })
	answer(w, rec, &d, &res)
}

// hasBody reports whether r carries a body: one it announces (a
// Content-Length, or chunked), or a byte read from it. A health check
// carries none; over HTTP/2 it may leave its stream open for an empty body
// of unknown length (ContentLength -1), which the read finds empty.
func hasBody(r *http.Request) bool {
	if r.ContentLength > 0 || len(r.TransferEncoding) > 0 {
		return true
	}
	if r.Body == nil || r.Body == http.NoBody {
		return false
	}
	var b [1]byte
	n, _ := io.ReadFull(r.Body, b[:]) // nothing is lost: only a request read into is refused
	return n > 0
}

// refuseBody answers a GET, HEAD or OPTIONS that carries a body. It may be
// a push sent with the wrong method, and what it carries must not reach
// the handler unguarded: 405, logged as rejected.
func (g *Gateway) refuseBody(w http.ResponseWriter, r *http.Request) {
	err := fmt.Errorf("idemgate: a %s with a body is not a health check; push deliveries are POSTed", r.Method)
	d := Delivery{Message: pushenvelope.Identify(r.Header, nil), Path: r.URL.Path, Invalid: err}
	d.Form = d.Message.Form.String()
	g.deliver(r.Context(), &d, func(context.Context) error { return err }) // rejected before it runs: logs and counts
	w.Header().Set("Allow", http.MethodPost)
	http.Error(w, err.Error(), http.StatusMethodNotAllowed)
}

// allowed is the Allow header of a 405.
func allowed(pass http.Handler) string {
	if pass == nil {
		return "POST"
	}
	return "GET, HEAD, OPTIONS, POST"
}

// answer is the HTTP surface's table: the outcome of a delivery as the
// status Pub/Sub reads (2xx acks, anything else nacks).
func answer(w http.ResponseWriter, rec *recorder, d *Delivery, res *Result) {
	if res.Panic != nil {
		if res.Panic == http.ErrAbortHandler {
			panic(res.Panic) // the handler asked for the connection to be cut; nothing was sent
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	switch res.Outcome {
	case OutcomeRejected:
		code := http.StatusBadRequest
		if _, ok := errors.AsType[*pushenvelope.TooLargeError](res.Err); ok {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, res.Err.Error(), code)
	case OutcomeDuplicate:
		w.WriteHeader(http.StatusNoContent)
	case OutcomeConflict:
		if d.AcceptConflicts {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "idemgate: key reused for a different payload", http.StatusConflict)
	case OutcomeInProgress:
		if s := int(time.Until(res.LeaseUntil).Seconds()) + 1; s > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s))
		}
		http.Error(w, "idemgate: in progress elsewhere; retry later", http.StatusServiceUnavailable)
	case OutcomeStoreError:
		http.Error(w, "idemgate: store unavailable", http.StatusServiceUnavailable)
	case OutcomeCancelled:
		http.Error(w, "idemgate: the request ended before its key was claimed", http.StatusServiceUnavailable)
	case OutcomeNoKey:
		http.Error(w, res.Err.Error(), http.StatusInternalServerError) // "gateway: no idempotency key: …"
	case OutcomeAlreadyFailed, OutcomeAbandoned:
		switch {
		case d.AckFailed:
			w.WriteHeader(http.StatusNoContent)
		case rec.status != 0 && !is2xx(rec.status):
			rec.send() // a wrapped handler's own failure
		default:
			// Any nack is retried until the dead-letter policy moves the
			// message; a 4xx keeps it out of the service's 5xx alerts.
			http.Error(w, "idemgate: the work for this key failed for good; refused until retried", http.StatusUnprocessableEntity)
		}
	default: // the work ran: its own answer, or 500 for a failure that gave none
		if res.Err != nil && (rec.status == 0 || is2xx(rec.status)) {
			// A failure the handler's answer does not tell: a Push error,
			// or a handler that answered 2xx but lost its lease while it
			// ran. Its 2xx must not reach Pub/Sub.
			http.Error(w, "handler failed", http.StatusInternalServerError)
			return
		}
		rec.send()
	}
}
