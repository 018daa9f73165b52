package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/pushenvelope"
)

// Idempotent wraps h, a handler of Pub/Sub push deliveries, so that its
// work runs at most once per key. h may be a whole mux: GET, HEAD and
// OPTIONS requests, which are never push deliveries, go to h untouched, so
// health checks keep answering; other methods but POST get 405. Every POST
// is taken for a push delivery, so wrap the mux only when all its POST
// routes receive pushes; otherwise wrap each push route's handler, with
// the route's own key function through Route. It decodes the delivery (see package
// pushenvelope; h reads the same body, and finds the Message with
// pushenvelope.FromContext), resolves the key with Options.Key, runs h under
// Lock and answers Pub/Sub:
//
//	h answered 2xx, or wrote nothing   h's answer       ack; the key is done
//	the key is already done            204              ack
//	a live holder owns the key         503              nack: retried later
//	h answered non-2xx                 h's answer       nack; the claim is released
//	h panicked                         500              nack; the claim is released
//	the store failed                   503              nack
//	not a push delivery                400              nack (dead-lettered eventually)
//	no key                             500              nack, unless AllowUnguarded
//	body over MaxBodyBytes             413              nack
//
// h's status is the verdict: it should answer non-2xx when its work failed.
// It is held back with h's body until the claim is settled, so that a 2xx
// reaches Pub/Sub only once the key is recorded done (flushes wait too),
// and a handler that panics after writing a 2xx answers 500. A handler may
// still cut the connection with panic(http.ErrAbortHandler): the claim is
// released and nothing was sent.
// The acknowledging codes used here (200 and 204) are acks on Pub/Sub and on
// its emulator alike.
func (g *Gateway) Idempotent(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, h)
	})
}

// Push returns a handler that decodes each push delivery and runs fn on it
// under the guard of Idempotent. fn's nil answers 200 (ack); an error
// answers 500 (nack, retried) and is logged.
func (g *Gateway) Push(fn func(ctx context.Context, m *pushenvelope.Message) error) http.Handler {
	return g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := pushenvelope.FromContext(r.Context())
		if err := fn(r.Context(), m); err != nil {
			g.log.LogAttrs(r.Context(), slog.LevelError, "idemgate: handler failed; the delivery will be retried",
				OutcomeFailed.Attr(), slog.String("message_id", m.ID), slog.Any("error", err))
			http.Error(w, "handler failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
}

// statusError is the error a wrapped handler's non-2xx answer becomes, so
// that Lock releases the claim.
type statusError struct{ code int }

func (e statusError) Error() string { return "handler answered " + strconv.Itoa(e.code) }

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, h http.Handler) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		h.ServeHTTP(w, r) // never a push delivery: health checks and the like
		return
	default:
		w.Header().Set("Allow", "GET, HEAD, OPTIONS, POST")
		http.Error(w, "idemgate: push deliveries are POSTed", http.StatusMethodNotAllowed)
		return
	}
	var start time.Time // for the DEBUG line's duration only
	if g.log.Enabled(r.Context(), slog.LevelDebug) {
		start = time.Now()
	}
	m, err := pushenvelope.Decode(r, g.opts.MaxBodyBytes)
	if err != nil {
		var tooLarge *pushenvelope.TooLargeError
		code := http.StatusBadRequest
		if errors.As(err, &tooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		g.log.LogAttrs(r.Context(), slog.LevelWarn, "idemgate: rejected a request that is not a usable push delivery",
			slog.Int("status", code), slog.Any("error", err))
		http.Error(w, err.Error(), code)
		return
	}
	ctx := pushenvelope.NewContext(r.Context(), m)

	key, err := g.opts.Key(m)
	if err == nil && key == "" {
		err = errors.New("the key function returned an empty key")
	}
	if err != nil && !g.disabled {
		if g.opts.AllowUnguarded {
			g.log.LogAttrs(ctx, slog.LevelWarn, "idemgate: no key; running unguarded (AllowUnguarded)",
				OutcomeUnguarded.Attr(), deliveryAttrs(m), slog.Any("error", err))
			g.Unguarded(ctx, func(ctx context.Context) error {
				h.ServeHTTP(w, r.WithContext(ctx))
				return nil
			})
			return
		}
		g.log.LogAttrs(ctx, slog.LevelError, "idemgate: no idempotency key; refusing to run unguarded",
			OutcomeNoKey.Attr(), deliveryAttrs(m), slog.Any("error", err))
		g.tel.outcome(ctx, OutcomeNoKey)
		http.Error(w, "idemgate: no idempotency key: "+err.Error(), http.StatusInternalServerError)
		return
	}

	// h's answer is held until Lock has settled the claim: completed
	// before a 2xx goes out, released before a failure does.
	rec := &recorder{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p) // h asked for the connection to be cut; nothing was sent
			}
			g.log.LogAttrs(ctx, slog.LevelError, "idemgate: handler panicked; the claim was released",
				OutcomeFailed.Attr(), g.keyAttr(key), deliveryAttrs(m),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	err = g.Lock(ctx, key, func(ctx context.Context) error {
		h.ServeHTTP(rec, r.WithContext(ctx))
		if rec.status != 0 && (rec.status < 200 || rec.status > 299) {
			return statusError{rec.status}
		}
		return nil
	})
	rec.send()
	g.answer(ctx, w, m, key, err, start)
}

// answer writes the response for Lock's outcome, unless h already did.
func (g *Gateway) answer(ctx context.Context, w http.ResponseWriter, m *pushenvelope.Message, key string, err error, start time.Time) {
	switch {
	case err == nil:
		if g.log.Enabled(ctx, slog.LevelDebug) {
			g.log.LogAttrs(ctx, slog.LevelDebug, "idemgate: delivery processed",
				OutcomeWon.Attr(), g.keyAttr(key), deliveryAttrs(m), slog.Duration("duration", time.Since(start)))
		}
	case errors.Is(err, ErrDuplicate):
		if g.log.Enabled(ctx, slog.LevelDebug) {
			g.log.LogAttrs(ctx, slog.LevelDebug, "idemgate: duplicate delivery acknowledged",
				OutcomeDuplicate.Attr(), g.keyAttr(key), deliveryAttrs(m))
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		g.refused(ctx, w, m, key, err)
	}
}

// refused answers the outcomes that nack. It is apart from answer so that
// the happy path does not pay for the targets of errors.As, which escape.
func (g *Gateway) refused(ctx context.Context, w http.ResponseWriter, m *pushenvelope.Message, key string, err error) {
	var (
		inProgress *InProgressError
		failed     statusError
	)
	switch {
	case errors.As(err, &inProgress):
		// Contention is healthy: a quiet WARN, no stack. deliveryAttempt tells
		// how close the message is to the dead-letter topic.
		g.log.LogAttrs(ctx, slog.LevelWarn, "idemgate: key held by another delivery; asking Pub/Sub to retry",
			OutcomeInProgress.Attr(), g.keyAttr(key), deliveryAttrs(m),
			slog.Time("holder_lease_until", inProgress.LeaseUntil))
		if s := int(time.Until(inProgress.LeaseUntil).Seconds()) + 1; s > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s))
		}
		http.Error(w, "idemgate: in progress elsewhere; retry later", http.StatusServiceUnavailable)
	case errors.As(err, &failed):
		g.log.LogAttrs(ctx, slog.LevelWarn, "idemgate: handler failed; claim released for a retry",
			OutcomeFailed.Attr(), g.keyAttr(key), deliveryAttrs(m), slog.Int("status", failed.code))
	case errors.Is(err, ErrNoKey):
		g.log.LogAttrs(ctx, slog.LevelError, "idemgate: unusable idempotency key; refusing to run unguarded",
			OutcomeNoKey.Attr(), deliveryAttrs(m), slog.Any("error", err))
		http.Error(w, "idemgate: "+err.Error(), http.StatusInternalServerError)
	case errors.Is(err, ErrStore):
		g.log.LogAttrs(ctx, slog.LevelError, "idemgate: store failed; asking Pub/Sub to retry",
			OutcomeStoreError.Attr(), g.keyAttr(key), deliveryAttrs(m), slog.Any("error", err))
		http.Error(w, "idemgate: store unavailable", http.StatusServiceUnavailable)
	default:
		g.log.LogAttrs(ctx, slog.LevelError, "idemgate: delivery failed",
			OutcomeFailed.Attr(), g.keyAttr(key), deliveryAttrs(m), slog.Any("error", err))
		http.Error(w, "idemgate: "+fmt.Sprint(err), http.StatusInternalServerError)
	}
}

// deliveryAttrs groups what identifies a delivery in a log line.
func deliveryAttrs(m *pushenvelope.Message) slog.Attr {
	attrs := []slog.Attr{slog.String("message_id", m.ID), slog.String("form", m.Form.String())}
	if m.Subscription != "" {
		attrs = append(attrs, slog.String("subscription", m.Subscription))
	}
	if m.DeliveryAttempt > 0 {
		attrs = append(attrs, slog.Int("delivery_attempt", m.DeliveryAttempt))
	}
	return slog.Attr{Key: "delivery", Value: slog.GroupValue(attrs...)}
}

// recorder holds the wrapped handler's answer back until the delivery's
// outcome is settled, because the status is the ack: a 2xx must not reach
// Pub/Sub before the key is recorded done, nor at all if the handler then
// panics. The body is held in memory with it (Pub/Sub reads none of it, so
// push handlers write little or nothing). Headers go to the real writer's
// map at once: they are only sent with the status. Informational 1xx
// answers pass through. Unwrap lets http.ResponseController reach deadlines
// and the rest.
type recorder struct {
	http.ResponseWriter
	status int    // the final status h answered; 0 until it does
	body   []byte // what h wrote
}

func (rw *recorder) WriteHeader(code int) {
	if code < 200 {
		rw.ResponseWriter.WriteHeader(code)
	} else if rw.status == 0 {
		rw.status = code
	}
}

func (rw *recorder) Write(b []byte) (int, error) {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	rw.body = append(rw.body, b...)
	return len(b), nil
}

// Flush keeps handlers that assert http.Flusher working. There is nothing
// to flush while the answer is held.
func (rw *recorder) Flush() {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
}

// send writes the held answer, if h gave one, to the client.
func (rw *recorder) send() {
	if rw.status != 0 {
		rw.ResponseWriter.WriteHeader(rw.status)
		rw.ResponseWriter.Write(rw.body) // a client that is gone cannot hear it; Pub/Sub retries
	}
}

func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }
