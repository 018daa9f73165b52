package pull

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// Defaults of Options.
const (
	// DefaultAckTimeout bounds the wait for the result of an ack or nack on a
	// subscription with exactly-once delivery. Acks there are usually
	// confirmed within a second; the client retries transient failures for
	// much longer than this, in the background.
	DefaultAckTimeout = 10 * time.Second

	// DefaultInProgressDelay is how long a message whose key is held by
	// another delivery is kept before it is nacked. It matches the shortest
	// backoff Pub/Sub applies to push retries.
	DefaultInProgressDelay = 10 * time.Second
)

// Options configures Wrap. The zero value means the defaults; Wrap copies
// it, so the caller may reuse it.
type Options struct {
	// Key resolves the idempotency key of a message, from the message as
	// pushenvelope describes a push delivery (see messageOf), so that one key
	// function serves push, CloudEvents and pull alike. Default
	// gateway.KeyFromMessageID.
	Key gateway.KeyFunc

	// AllowUnguarded runs fn unguarded when no key can be resolved, instead
	// of nacking the message. Default false (fail closed: the message is
	// nacked, logged at ERROR, and ends in the dead-letter topic if the
	// subscription has one).
	AllowUnguarded bool

	// Subscription names the subscription in log lines, e.g.
	// sub.String(). A pulled message does not say which subscription it
	// came from. Default: not logged.
	Subscription string

	// AckTimeout bounds how long the callback waits for the result of its
	// ack or nack. Wrap always acknowledges with AckWithResult and
	// NackWithResult: on a subscription with exactly-once delivery the
	// result says whether Pub/Sub accepted the ack, and a failure is logged;
	// on other subscriptions the client resolves the result at once, so
	// there is nothing to wait for and nothing to configure. Pub/Sub
	// reports exactly-once delivery to the client with each pull; it cannot
	// be read from a message. Default DefaultAckTimeout; negative: do not
	// wait or log (plain Ack and Nack).
	AckTimeout time.Duration

	// InProgressDelay is how long a message whose key a live holder owns
	// (another delivery of it is being processed, here or elsewhere) is
	// kept before it is nacked, capped by the end of the holder's lease.
	// Pub/Sub redelivers a nacked message at once unless the subscription
	// has a retry policy, so nacking straight away would spin, spending a
	// delivery attempt (towards the dead-letter topic) each time, until the
	// holder finishes. The client keeps extending the message's ack
	// deadline meanwhile, and the message counts against
	// MaxOutstandingMessages. Default DefaultInProgressDelay; negative: nack
	// at once (set a retry policy on the subscription instead).
	InProgressDelay time.Duration

	// Logger receives one line per message that was not simply processed or
	// recognised as a duplicate (those are logged at DEBUG). Default: the
	// gateway's logger. Keys are logged as the gateway logs them (hidden
	// behind a digest when its Options.HideKeys is set).
	Logger *slog.Logger
}

// Wrap returns a callback for pubsub.Subscriber.Receive that runs fn under
// g.Lock, keyed by Options.Key, and acknowledges each message according to
// the outcome:
//
//	fn returned nil                 ack (after the key was recorded as done)
//	the key is already done         ack: a duplicate; fn does not run
//	a live holder owns the key      nack after InProgressDelay; WARN
//	fn returned an error            nack (after the claim was released); ERROR
//	fn panicked                     nack (after the claim was released); the panic goes on
//	no key could be resolved        nack; ERROR (unless AllowUnguarded)
//	the store failed                nack; ERROR
//
// fn must not Ack or Nack the message itself: the callback does, once fn's
// outcome is settled in the store. fn's context carries the claim (see
// gateway.ClaimFromContext). A panic in fn is not recovered: as in any
// Receive callback it ends the program, but only after the claim was
// released and the message nacked, so the redelivery runs fn again.
//
// Wrap panics if g or fn is nil.
func Wrap(g *gateway.Gateway, fn func(ctx context.Context, m *pubsub.Message) error, opts *Options) func(context.Context, *pubsub.Message) {
	if g == nil {
		panic("pull: Wrap with a nil Gateway")
	}
	if fn == nil {
		panic("pull: Wrap with a nil fn")
	}
	h := &handler{g: g, fn: fn}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.Key == nil {
		h.opts.Key = gateway.KeyFromMessageID
	}
	if h.opts.AckTimeout == 0 {
		h.opts.AckTimeout = DefaultAckTimeout
	}
	if h.opts.InProgressDelay == 0 {
		h.opts.InProgressDelay = DefaultInProgressDelay
	}
	if h.opts.Logger == nil {
		h.opts.Logger = g.Logger()
	}
	h.log = h.opts.Logger
	return h.receive
}

// handler is the state behind one Wrap. It is safe for concurrent use:
// nothing in it changes after Wrap.
type handler struct {
	g    *gateway.Gateway
	fn   func(context.Context, *pubsub.Message) error
	opts Options
	log  *slog.Logger
}

// receive is the Receive callback.
func (h *handler) receive(ctx context.Context, m *pubsub.Message) {
	start := time.Now()
	var key string
	settled := false
	defer func() {
		if !settled {
			// The key function or fn panicked (the panic goes on once this
			// returns), or called runtime.Goexit. Lock has released the
			// claim; the message must not wait out its ack deadline.
			h.logf(ctx, slog.LevelError, "idemgate: handler panicked or exited; claim released, message nacked",
				gateway.OutcomeFailed, key, m)
			m.Nack()
		}
	}()

	key, keyErr := h.opts.Key(messageOf(m))
	if keyErr == nil && key == "" {
		keyErr = errors.New("the key function returned an empty key")
	}
	ran := false
	body := func(ctx context.Context) error {
		ran = true
		return h.fn(ctx, m)
	}
	var err error
	switch {
	case keyErr != nil && h.opts.AllowUnguarded:
		h.logf(ctx, slog.LevelWarn, "idemgate: no key; running unguarded (AllowUnguarded)",
			gateway.OutcomeUnguarded, "", m, slog.Any("error", keyErr))
		err = h.g.Unguarded(ctx, body)
	default:
		// Without a key Lock refuses with ErrNoKey before touching the
		// store, unless the gateway is disabled, when it runs the body as
		// a logged pass-through like every other guard.
		err = h.g.Lock(ctx, key, body)
	}
	settled = true
	h.settle(ctx, m, key, keyErr, ran, err, start)
}

// settle acknowledges m according to the outcome of Lock (or of fn, if it
// ran: its result is the verdict, whatever it wraps).
func (h *handler) settle(ctx context.Context, m *pubsub.Message, key string, keyErr error, ran bool, err error, start time.Time) {
	var inProgress *gateway.InProgressError
	switch {
	case ran && err == nil:
		h.logf(ctx, slog.LevelDebug, "idemgate: message processed",
			gateway.OutcomeWon, key, m, slog.Duration("duration", time.Since(start)))
		h.ack(ctx, m, key)
	case ran:
		h.logf(ctx, slog.LevelError, "idemgate: handler failed; claim released, message nacked for a retry",
			gateway.OutcomeFailed, key, m, slog.Any("error", err))
		h.nack(ctx, m, key)
	case errors.Is(err, gateway.ErrDuplicate):
		h.logf(ctx, slog.LevelDebug, "idemgate: duplicate message acknowledged",
			gateway.OutcomeDuplicate, key, m)
		h.ack(ctx, m, key)
	case errors.As(err, &inProgress):
		// Contention is healthy: a quiet WARN without a stack. The delivery
		// attempt tells how close the message is to the dead-letter topic.
		h.logf(ctx, slog.LevelWarn, "idemgate: key held by another delivery; nacking the message for a retry",
			gateway.OutcomeInProgress, key, m, slog.Time("holder_lease_until", inProgress.LeaseUntil))
		h.hold(ctx, inProgress.LeaseUntil)
		h.nack(ctx, m, key)
	case errors.Is(err, gateway.ErrNoKey):
		if keyErr != nil {
			err = keyErr
		}
		h.logf(ctx, slog.LevelError, "idemgate: no idempotency key; refusing to run unguarded, message nacked",
			gateway.OutcomeNoKey, "", m, slog.Any("error", err))
		h.nack(ctx, m, key)
	case errors.Is(err, gateway.ErrStore):
		h.logf(ctx, slog.LevelError, "idemgate: store failed; message nacked for a retry",
			gateway.OutcomeStoreError, key, m, slog.Any("error", err))
		h.nack(ctx, m, key)
	default:
		h.logf(ctx, slog.LevelError, "idemgate: message not processed; nacked for a retry",
			gateway.OutcomeFailed, key, m, slog.Any("error", err))
		h.nack(ctx, m, key)
	}
}

// hold waits before a nack of a message whose key is held, so that its
// redeliveries do not spin while the holder works: InProgressDelay, or
// until the holder's lease ends if that is sooner, or until Receive stops.
func (h *handler) hold(ctx context.Context, leaseUntil time.Time) {
	d := h.opts.InProgressDelay
	if !leaseUntil.IsZero() {
		d = min(d, time.Until(leaseUntil))
	}
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// messageOf is m as a key function sees it: the fields a pull and a push
// delivery of one message share, so that both get the same key. Its Form
// is zero: a pulled message came in none of the push forms.
func messageOf(m *pubsub.Message) *pushenvelope.Message {
	attempt := 0
	if m.DeliveryAttempt != nil {
		attempt = *m.DeliveryAttempt
	}
	attrs := m.Attributes
	if attrs == nil {
		attrs = map[string]string{}
	}
	return &pushenvelope.Message{
		ID:              m.ID,
		Data:            m.Data,
		Attributes:      attrs,
		PublishTime:     m.PublishTime.UTC(),
		OrderingKey:     m.OrderingKey,
		DeliveryAttempt: attempt,
	}
}
