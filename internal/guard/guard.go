// Package guard carries the gateway's delivery guard to the adapters that
// live in other packages (cloudevent and pull), so that the one decision
// every delivery surface makes stays unexported in package gateway.
//
// An adapter decodes its delivery, resolves the key, and hands both to Run
// with the work; the guard applies the rules (a missing key, AllowUnguarded,
// Lock, a panic in the work), logs the delivery's one line, counts its
// outcome and returns a Result. The adapter's own job is a table from the
// Result's outcome to its answer: an HTTP status, a functions-framework
// result, an ack or a nack.
package guard

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/pushenvelope"
)

// Delivery is what an adapter knows of one delivery when it asks the guard
// to run it.
type Delivery struct {
	// Invalid, if set, says why the request is no usable delivery: the
	// guard refuses it (Outcome rejected) before looking at the key.
	Invalid error
	// Message is the delivery as the key function saw it; its ID,
	// Subscription and DeliveryAttempt identify the delivery in log lines.
	// It may be nil only with Invalid.
	Message *pushenvelope.Message
	// Form names the surface in log lines: a push form (as
	// pushenvelope.Form names it), "cloudevent" or "pull".
	Form string
	// Path is the HTTP request's path on the push surface, logged so that
	// a line names its route; empty elsewhere.
	Path string
	// EventType is a CloudEvent's type, logged with the delivery; empty
	// elsewhere. (Its source is the Message's.)
	EventType string
	// Key is what the key function resolved; KeyErr why it resolved none.
	// An empty Key without KeyErr is refused as well.
	Key    string
	KeyErr error
	// AllowUnguarded runs the work unguarded when there is no key.
	AllowUnguarded bool
	// Fingerprint, if set, fingerprints the payload (gateway.FingerprintFunc);
	// an error rejects the delivery.
	Fingerprint func(*pushenvelope.Message) ([]byte, error)
	// AcceptConflicts logs a conflict as accepted: the adapter acknowledges
	// it as a duplicate instead of refusing it.
	AcceptConflicts bool
	// AckFailed says the deliveries of a FAILED key are acknowledged (the
	// gateway's AckFailed), not refused: the guard sets it.
	AckFailed bool
	// CancelIsShutdown says that the context of the delivery ends when the
	// consumer stops (a pull Receive shutting down), not when the message
	// outlasts its delivery: a failure of the work once it has ended is not
	// counted against the key's attempt budget.
	CancelIsShutdown bool
	// Logger receives the delivery's log line; nil means the gateway's.
	Logger *slog.Logger
}

// Result is what became of a delivery.
type Result struct {
	// Outcome is one of the gateway.Outcome values.
	Outcome string
	// Ran says the work ran: the outcomes won, fenced_out, complete_error,
	// failed, abandoned and unguarded.
	Ran bool
	// Err is the work's error when it ran and failed, and otherwise why it
	// did not run. When the gateway hides keys, an Err of a work that did
	// not run holds the key's digest, never the key.
	Err error
	// Panic is what the work panicked with, recovered (Outcome failed).
	// The adapter answers it or panics again.
	Panic any
	// LeaseUntil is when the holder's lease ends (Outcome in_progress).
	LeaseUntil time.Time
}

// Millis is d as the log attribute name_ms, in milliseconds: every
// duration a line carries names its unit the same way.
func Millis(name string, d time.Duration) slog.Attr {
	return slog.Float64(name+"_ms", float64(d)/float64(time.Millisecond))
}

// Run runs work for d under g's guard. Package gateway sets it; g must be a
// *gateway.Gateway.
var Run func(g any, ctx context.Context, d *Delivery, work func(context.Context) error) Result

// Log writes an adapter's own line about d (a failed ack) as the guard
// writes its lines: to d.Logger or g's logger, with the key as g logs keys
// and d's "delivery" group. Package gateway sets it.
var Log func(g any, ctx context.Context, d *Delivery, level slog.Level, msg string, attrs ...slog.Attr)
