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
	// Route is the subscriber's route settings over the Gateway's (see
	// gateway.RouteOptions): its key function sees a pulled message as a
	// pushenvelope.Message with the subscription below and a zero Form.
	// A refusal (no key, a conflict, a FAILED key) is a nack.
	Route gateway.RouteOptions

	// Subscription names the subscription in log lines (a pulled message
	// does not say which it came from), e.g. sub.String(). Default: not
	// logged.
	Subscription string

	// AckTimeout bounds the wait for the result of each ack or nack, which
	// Wrap sends with AckWithResult and NackWithResult: on a subscription
	// with exactly-once delivery a failure is then logged; on others the
	// result is at once. Default DefaultAckTimeout; negative: plain Ack and
	// Nack (docs/pull.md, "Exactly-once delivery").
	AckTimeout time.Duration

	// InProgressDelay is how long a message whose key a live holder owns
	// (or whose fn met a holder: gateway.ErrInProgress) is kept before it
	// is nacked, capped by the holder's lease, so that its redeliveries do
	// not spin and spend delivery attempts. Default DefaultInProgressDelay;
	// negative: nack at once. A message with an ordering key is never
	// nacked while the holder lives: it is tried again in place after each
	// wait (docs/pull.md, "Why a held key waits before the nack",
	// "Ordering keys").
	InProgressDelay time.Duration

	// Logger receives the guard's line for each message and the lines about
	// failed acks. Default: the gateway's logger.
	Logger *slog.Logger

	// after, if set, replaces time.After in the waits of held messages
	// (tests).
	after func(time.Duration) <-chan time.Time
}

// Wrap returns a callback for pubsub.Subscriber.Receive that runs fn under
// g.Lock, with the route's settings of Options.Route, and acknowledges each
// message by the outcome:
//
//	fn returned nil, or the key is done   ack
//	a live holder owns the key, or fn's   nack after InProgressDelay
//	own Mutex met one
//	fn returned an error, or panicked     nack (after the claim was released)
//	fn's transaction fenced out           ack when the key is done, else as held or failed
//	no key, or the store failed           nack
//	key reused for another payload        nack, or ack with AcceptConflicts
//	the work failed for good              nack, or ack with AckFailed
//
// fn must not Ack or Nack the message: the callback does, once fn's
// outcome is settled in the store. fn's context carries the claim (see
// gateway.ClaimFromContext). A panic in fn ends the program, as in any
// Receive callback, but only after the claim was released and the message
// nacked. docs/pull.md, "How outcomes map to acks", gives each log line.
//
// Wrap panics if g or fn is nil.
func Wrap(g *gateway.Gateway, fn func(ctx context.Context, m *pubsub.Message) error, opts *Options) func(context.Context, *pubsub.Message) {
	if g == nil {
		panic("pull: Wrap with a nil Gateway")
	}
	if fn == nil {
		panic("pull: Wrap with a nil fn")
	}
	h := &handler{fn: fn}
	if opts != nil {
		h.opts = *opts
	}
	h.g = g.Route(&h.opts.Route)
	if h.opts.AckTimeout == 0 {
		h.opts.AckTimeout = DefaultAckTimeout
	}
	if h.opts.InProgressDelay == 0 {
		h.opts.InProgressDelay = DefaultInProgressDelay
	}
	return h.receive
}

// handler is the state behind one Wrap. It is safe for concurrent use:
// nothing in it changes after Wrap.
type handler struct {
	g    *gateway.Gateway
	fn   func(context.Context, *pubsub.Message) error
	opts Options
}

// receive is the Receive callback.
func (h *handler) receive(ctx context.Context, m *pubsub.Message) {
	settled := false
	defer func() {
		if !settled {
			// The key function or fn panicked (the panic goes on once this
			// returns), or fn called runtime.Goexit. The claim is
			// released; the message must not wait out its ack deadline.
			m.Nack()
		}
	}()
	d := gateway.Delivery{Message: messageOf(m, h.opts.Subscription), Form: "pull", Logger: h.opts.Logger, CancelIsShutdown: true}
	work := func(ctx context.Context) error { return h.fn(ctx, m) }
	for {
		res := h.g.Deliver(ctx, &d, work)
		until, held := heldUntil(&res)
		if held && m.OrderingKey != "" && ctx.Err() == nil {
			// A nack would let the key's later messages overtake this
			// one: the client runs the next message of an ordering key
			// as soon as this callback returns. Wait, and try again in
			// place, until the holder settles.
			h.sleep(ctx, h.orderedPause(until))
			if ctx.Err() == nil {
				continue
			}
		}
		settled = true
		h.settle(ctx, m, &d, &res, held, until)
		return
	}
}

// heldUntil reports whether res is an in-progress answer, and until when
// the holder's lease runs (zero if unknown): the key's own (Outcome
// in_progress), or one that fn returned, a Mutex or Lock of fn's own that
// met a live holder of its key (an error matching gateway.ErrInProgress).
// Both end when another caller lets go of a key; neither is helped by an
// immediate redelivery.
func heldUntil(res *gateway.Result) (time.Time, bool) {
	switch {
	case res.Panic != nil:
		return time.Time{}, false
	case res.Outcome == gateway.OutcomeInProgress:
		return res.LeaseUntil, true
	case res.Ran && errors.Is(res.Err, gateway.ErrInProgress):
		if ip, ok := errors.AsType[*gateway.InProgressError](res.Err); ok {
			return ip.LeaseUntil, true
		}
		return time.Time{}, true
	}
	return time.Time{}, false
}

// settle is the pull surface's table: the outcome of a message as an ack or
// a nack. held and until are heldUntil's.
func (h *handler) settle(ctx context.Context, m *pubsub.Message, d *gateway.Delivery, res *gateway.Result, held bool, until time.Time) {
	switch o := res.Outcome; {
	case res.Panic != nil:
		m.Nack()
		panic(res.Panic) // the claim is released; as in any Receive callback, the program ends
	case held:
		h.hold(ctx, until)
		h.nack(ctx, m, d)
	case o == gateway.OutcomeDuplicate, o == gateway.OutcomeConflict && d.AcceptConflicts,
		(o == gateway.OutcomeAlreadyFailed || o == gateway.OutcomeAbandoned) && d.AckFailed,
		res.Ran && res.Err == nil: // won, fenced_out, complete_error, unguarded
		h.ack(ctx, m, d, o)
	default: // failed, no_key, store_error, conflict, already_failed, abandoned
		h.nack(ctx, m, d)
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
	h.sleep(ctx, d)
}

// minOrderedPause is the shortest wait before a message with an ordering
// key whose key is held is tried again, should the holder's lease seem to
// have ended already (clocks differ).
const minOrderedPause = 100 * time.Millisecond

// orderedPause is how long a message with an ordering key waits before it
// is tried again: as hold waits, but never nothing, since it does not
// nack. A negative InProgressDelay (nack at once) does not apply: a nack
// is what breaks the order.
func (h *handler) orderedPause(leaseUntil time.Time) time.Duration {
	d := h.opts.InProgressDelay
	if d <= 0 {
		d = DefaultInProgressDelay
	}
	if !leaseUntil.IsZero() {
		d = min(d, time.Until(leaseUntil))
	}
	floor := minOrderedPause
	if h.opts.InProgressDelay > 0 {
		floor = min(floor, h.opts.InProgressDelay)
	}
	return max(d, floor)
}

// sleep waits d, or until ctx ends.
func (h *handler) sleep(ctx context.Context, d time.Duration) {
	if h.opts.after != nil {
		select {
		case <-h.opts.after(d):
		case <-ctx.Done():
		}
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
// delivery of one message share, so that both get the same key, and the
// subscription Options names. Its Form is zero: a pulled message came in
// none of the push forms.
func messageOf(m *pubsub.Message, subscription string) *pushenvelope.Message {
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
		Subscription:    subscription,
	}
}
