package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/pushenvelope"
)

// A Delivery is what a delivery surface (the HTTP middleware, package
// cloudevent, package pull) knows of one delivery when it asks the gateway
// to run it with [Gateway.Deliver]. A surface of your own fills one per
// delivery, as those do; the route's settings (key, fingerprint, policies)
// are the Gateway's, so take a [Gateway.Route] for a route of its own.
type Delivery struct {
	// Invalid, if set, says why the request is no usable delivery: it is
	// rejected before its key is looked at.
	Invalid error
	// Message is the delivery as the key function sees it; its ID,
	// Subscription and DeliveryAttempt identify it in log lines. It may be
	// nil only with Invalid.
	Message *pushenvelope.Message
	// Form names the surface in log lines: a push form (as
	// pushenvelope.Form names it), "cloudevent" or "pull".
	Form string
	// Path is the HTTP request's path, logged to name the route; EventType
	// is a CloudEvent's type. Both are empty where they do not apply.
	Path, EventType string
	// CancelIsShutdown says that the delivery's context ends when the
	// consumer stops, not when the message outlasts its delivery: a failure
	// of the work after it ended is not counted against the key's attempts.
	CancelIsShutdown bool
	// Logger receives the delivery's log lines; nil means the gateway's.
	Logger *slog.Logger

	// Deliver sets the fields below, for the surface's answer and its own
	// lines (LogDelivery): the key the route's Key resolved (empty if
	// none), and the route's AcceptConflicts and AckFailed.
	Key                        string
	AcceptConflicts, AckFailed bool
}

// A Result is what became of a delivery.
type Result struct {
	Outcome Outcome
	// Ran reports whether the work ran.
	Ran bool
	// Err is the work's error when it ran and failed, and otherwise why it
	// did not run; with HideKeys, an Err of a work that did not run holds
	// the key's digest, never the key.
	Err error
	// Panic is what the work panicked with, recovered (Outcome failed).
	// The surface answers it or panics again.
	Panic any
	// LeaseUntil is when the holder's lease ends (Outcome in_progress).
	LeaseUntil time.Time
}

// Deliver runs work for d under the gateway's rules and returns what
// became of it: d.Invalid is rejected; a delivery without a key is refused
// with ErrNoKey, or run unguarded with AllowUnguarded; any other runs work
// under Lock, with the payload's fingerprint when the route takes one. A
// panic in work is recovered into Result.Panic after the claim is
// released. Deliver writes the delivery's one log line and counts its
// outcome; the surface maps the Result to its answer.
func (g *Gateway) Deliver(ctx context.Context, d *Delivery, work func(context.Context) error) Result {
	return g.deliver(ctx, d, work)
}

// LogDelivery writes a surface's own line about d (a failed ack, say) as
// Deliver writes its lines: to d.Logger or the gateway's logger, with the
// key as the gateway logs keys and d's "delivery" group.
func (g *Gateway) LogDelivery(ctx context.Context, d *Delivery, level slog.Level, msg string, attrs ...slog.Attr) {
	g.logDelivery(ctx, g.logFor(d), d, level, msg, "", attrs...)
}
