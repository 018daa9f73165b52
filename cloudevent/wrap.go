package cloudevent

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// Options configures Wrap. The zero value means the defaults; Wrap copies
// it, so the caller may reuse it.
type Options struct {
	// Key resolves the idempotency key of each event, from its message: the
	// decoded Pub/Sub message of a messagePublished event, or, for any other
	// event, a message holding the event's id, source and data, with no
	// attributes and a zero Form (it is no Pub/Sub delivery). It is the one
	// key function type of push, CloudEvents and pull, so a function and a
	// push endpoint sharing a store agree on keys.
	// Default gateway.KeyFromMessageID: the messageId, which for a Pub/Sub
	// event is also the event id, and otherwise the event id.
	Key gateway.KeyFunc

	// AllowUnguarded runs the function unguarded when no key can be
	// resolved, instead of failing the event (500). Default false: fail
	// closed.
	AllowUnguarded bool

	// Logger receives Wrap's log lines, one per event: DEBUG when the
	// function ran or the event was a duplicate; WARN when a live holder
	// owns the key, the event is malformed or runs unguarded; ERROR when the
	// function failed or panicked, the store failed or no key could be
	// resolved. The lines carry the event's identity (message id, source,
	// subscription) and the key as the gateway logs keys (a digest when its
	// Options.HideKeys is set). Default: the gateway's logger.
	Logger *slog.Logger
}

// Wrap returns a CloudEvent function that runs fn at most once per key,
// under g's Lock. Register the result with functions.CloudEvent (package
// github.com/GoogleCloudPlatform/functions-framework-go/functions), or hand
// it to a CloudEvents SDK receiver.
//
// For a Pub/Sub event (type [pushenvelope.MessagePublishedType]) Wrap decodes
// the data into a [pushenvelope.Message] once, hands it to the key function,
// and puts it in fn's context, where [pushenvelope.FromContext] finds it. The
// claim is in the context too ([gateway.ClaimFromContext]). The Message's
// Form is CloudEventBinary whichever mode carried the event: the SDK does
// not say.
//
// fn's result is the verdict: nil, or a result that functions-framework
// answers with a 2xx status (e.g. a *cehttp.Result with code 204), records
// the key as done; anything else releases the claim so that the retry runs
// fn again, and is returned unchanged. See the package documentation for
// the answer to each outcome. A panic in fn releases the claim and goes on;
// functions-framework recovers it and answers 500.
//
// Wrap panics if g or fn is nil: that is a programming error, and failing
// at registration beats failing every event.
func Wrap(g *gateway.Gateway, fn func(context.Context, event.Event) error, opts *Options) func(context.Context, event.Event) error {
	if g == nil {
		panic("cloudevent: Wrap with a nil *gateway.Gateway")
	}
	if fn == nil {
		panic("cloudevent: Wrap with a nil function")
	}
	w := &wrapper{g: g, fn: fn}
	if opts != nil {
		w.opts = *opts
	}
	if w.opts.Key == nil {
		w.opts.Key = gateway.KeyFromMessageID
	}
	if w.opts.Logger == nil {
		w.opts.Logger = g.Logger()
	}
	w.log = w.opts.Logger
	return w.serve
}

// wrapper is the state of one Wrap call. It is read-only after Wrap, so
// safe for concurrent use.
type wrapper struct {
	g    *gateway.Gateway
	fn   func(context.Context, event.Event) error
	opts Options
	log  *slog.Logger
}

func (w *wrapper) serve(ctx context.Context, e event.Event) error {
	start := time.Now()

	// 1. A Pub/Sub event: decode its message once, for the key and for fn.
	// Any other event stands as a message of its own for the key function.
	var m *pushenvelope.Message
	if e.Type() == pushenvelope.MessagePublishedType {
		var err error
		m, err = pushenvelope.FromMessagePublishedData(e.ID(), e.Source(), e.Data())
		if err != nil {
			w.log.LogAttrs(ctx, slog.LevelWarn, "idemgate: rejected a messagePublished event whose data is not a Pub/Sub message",
				slog.Int("status", http.StatusBadRequest), eventAttrs(e, nil), slog.Any("error", err))
			return withStatus(http.StatusBadRequest, "idemgate: event data is not a Pub/Sub message", err)
		}
		ctx = pushenvelope.NewContext(ctx, m)
	}

	// 2. The key. Without one, fail closed unless told otherwise.
	km := m
	if km == nil {
		km = &pushenvelope.Message{ID: e.ID(), Data: e.Data(), Source: e.Source(), Attributes: map[string]string{}}
	}
	key, keyErr := w.opts.Key(km)
	if keyErr == nil && key == "" {
		keyErr = errors.New("the key function returned an empty key")
	}
	if keyErr != nil && w.opts.AllowUnguarded {
		w.log.LogAttrs(ctx, slog.LevelWarn, "idemgate: no key; running unguarded (AllowUnguarded)",
			gateway.OutcomeUnguarded.Attr(), eventAttrs(e, m), slog.Any("error", keyErr))
		return w.g.Unguarded(ctx, func(ctx context.Context) error { return w.fn(ctx, e) })
	}
	// With keyErr set, key is empty: Lock refuses it with ErrNoKey before
	// calling the store (and counts the outcome), or, on a disabled gateway,
	// runs fn unguarded, as the HTTP middleware does.

	// 3. Run fn under the lock. fn's own result goes back to the framework
	// unchanged whenever fn ran.
	var (
		ran      bool
		result   error
		returned bool
	)
	defer func() {
		if !returned { // fn panicked; Lock released the claim
			w.log.LogAttrs(ctx, slog.LevelError, "idemgate: function panicked; the claim was released for a retry",
				gateway.OutcomeFailed.Attr(), eventAttrs(e, m))
		}
	}()
	err := w.g.Lock(ctx, key, func(ctx context.Context) error {
		ran = true
		result = w.fn(ctx, e)
		if acknowledged(result) {
			return nil
		}
		return result
	})
	returned = true
	if ran {
		return w.ran(ctx, e, m, key, result, err, time.Since(start))
	}
	return w.refused(ctx, e, m, key, err, keyErr)
}

// ran logs the outcome of an event whose function ran, and returns fn's
// result. err is Lock's: nil, or result when fn failed.
func (w *wrapper) ran(ctx context.Context, e event.Event, m *pushenvelope.Message, key string, result, err error, took time.Duration) error {
	if err != nil {
		w.log.LogAttrs(ctx, slog.LevelError, "idemgate: function failed; the claim was released for a retry",
			gateway.OutcomeFailed.Attr(), eventAttrs(e, m), w.keyAttr(key), slog.Any("error", err))
		return result
	}
	w.log.LogAttrs(ctx, slog.LevelDebug, "idemgate: event processed",
		gateway.OutcomeWon.Attr(), eventAttrs(e, m), w.keyAttr(key), slog.Duration("duration", took))
	return result // nil, or fn's own acknowledging result
}

// refused logs why fn did not run and returns the framework's answer. err
// is Lock's; keyErr says why no key was resolved, if none was.
func (w *wrapper) refused(ctx context.Context, e event.Event, m *pushenvelope.Message, key string, err, keyErr error) error {
	var inProgress *gateway.InProgressError
	switch {
	case errors.Is(err, gateway.ErrDuplicate):
		w.log.LogAttrs(ctx, slog.LevelDebug, "idemgate: duplicate event acknowledged",
			gateway.OutcomeDuplicate.Attr(), eventAttrs(e, m), w.keyAttr(key))
		return nil
	case errors.As(err, &inProgress):
		// Contention is healthy: a quiet WARN, no stack. The delivery attempt
		// is logged only when the event data carries one (see eventAttrs).
		w.log.LogAttrs(ctx, slog.LevelWarn, "idemgate: key held by another delivery; asking for a retry",
			gateway.OutcomeInProgress.Attr(), eventAttrs(e, m), w.keyAttr(key),
			slog.Time("holder_lease_until", inProgress.LeaseUntil))
		return withStatus(http.StatusServiceUnavailable, "idemgate: in progress elsewhere; retry later", hideKey(w.g, key, err))
	case errors.Is(err, gateway.ErrNoKey):
		if keyErr == nil { // the key function answered, but the store refuses the key
			keyErr = err
		}
		w.log.LogAttrs(ctx, slog.LevelError, "idemgate: no idempotency key; refusing to run unguarded",
			gateway.OutcomeNoKey.Attr(), eventAttrs(e, m), w.keyAttr(key), slog.Any("error", keyErr))
		return withStatus(http.StatusInternalServerError, "idemgate: no idempotency key", hideKey(w.g, key, errors.Join(err, keyErr)))
	default: // gateway.ErrStore; anything else Lock may add is treated alike
		w.log.LogAttrs(ctx, slog.LevelError, "idemgate: store failed; asking for a retry",
			gateway.OutcomeStoreError.Attr(), eventAttrs(e, m), w.keyAttr(key), slog.Any("error", err))
		return withStatus(http.StatusServiceUnavailable, "idemgate: store unavailable", hideKey(w.g, key, err))
	}
}

// keyAttr is the key as the gateway logs it; nothing when there is none.
func (w *wrapper) keyAttr(key string) slog.Attr {
	if key == "" {
		return slog.Attr{}
	}
	return w.g.KeyAttr(key)
}

// eventAttrs groups what identifies an event in a log line. m is nil for
// events that are not Pub/Sub messages.
func eventAttrs(e event.Event, m *pushenvelope.Message) slog.Attr {
	id := e.ID()
	if m != nil && m.ID != "" {
		id = m.ID
	}
	attrs := []slog.Attr{
		slog.String("message_id", id),
		slog.String("form", "cloudevent"),
		slog.String("type", e.Type()),
		slog.String("source", e.Source()),
	}
	if m != nil && m.Subscription != "" {
		attrs = append(attrs, slog.String("subscription", m.Subscription))
	}
	// Eventarc's events and functions-framework's conversion of push bodies
	// carry no delivery attempt as far as we know; log it when one does.
	if m != nil && m.DeliveryAttempt > 0 {
		attrs = append(attrs, slog.Int("delivery_attempt", m.DeliveryAttempt))
	}
	return slog.Attr{Key: "delivery", Value: slog.GroupValue(attrs...)}
}
