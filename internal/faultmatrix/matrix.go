// Package faultmatrix is the fault matrix the delivery surfaces (HTTP push,
// CloudEvents, pull) are tested against: rows of handler behaviours, columns
// of store faults, one checker of the delivery invariants in every cell.
// A surface's test supplies a [Surface] (its behaviours, and a fresh world per
// cell: a gateway over a [faultstore.Store] and a driver); [Run] runs every
// cell as the subtest "<behaviour>/<fault>". The invariants: docs/testing.md,
// "The fault matrix".
package faultmatrix

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/faultstore"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// Behaviour is a row: what the handler does once its body may go on.
type Behaviour string

// The rows. A surface uses those that make sense on it.
const (
	// OK succeeds: nil, or a 2xx answer.
	OK Behaviour = "ok"
	// Error fails with an error (HTTP: through Gateway.Push, answering 500).
	Error Behaviour = "error"
	// Non2xx answers a non-2xx status (HTTP) or result (CloudEvents).
	Non2xx Behaviour = "non_2xx"
	// Panic panics before answering anything.
	Panic Behaviour = "panic_before_status"
	// PanicAfter2xx writes a 2xx status, then panics (HTTP).
	PanicAfter2xx Behaviour = "panic_after_2xx"
	// FlushThenPanic flushes a 2xx response, then panics (HTTP).
	FlushThenPanic Behaviour = "flush_then_panic"
	// Outlives succeeds, but only after its caller's context has ended: the
	// caller gives up while the body, ignoring its context, still runs.
	Outlives Behaviour = "outlives_caller"
)

// PanicValue is what the panicking rows panic with.
const PanicValue = "faultmatrix: the handler panicked"

// Panics reports whether b panics.
func (b Behaviour) Panics() bool {
	return b == Panic || b == PanicAfter2xx || b == FlushThenPanic
}

// Fault is a column: what the store does wrong while the first delivery of
// the cell runs. Redeliveries and probes meet a healthy store (still slow
// in the slow column).
type Fault struct {
	Name string
	Op   faultstore.Op
	Mode faultstore.Mode // 0: no armed fault
	Slow bool            // every operation is delayed by Surface.SlowDelay
}

// Faults are the columns, in order.
var Faults = []Fault{
	{Name: "none"},
	{Name: "claim_error", Op: faultstore.Claim, Mode: faultstore.Fail},
	{Name: "complete_error", Op: faultstore.Complete, Mode: faultstore.Fail},
	{Name: "release_error", Op: faultstore.Release, Mode: faultstore.Fail},
	{Name: "claim_reply_lost", Op: faultstore.Claim, Mode: faultstore.Lost},
	{Name: "complete_reply_lost", Op: faultstore.Complete, Mode: faultstore.Lost},
	{Name: "release_reply_lost", Op: faultstore.Release, Mode: faultstore.Lost},
	{Name: "slow", Slow: true},
}

// is reports whether f is the armed fault op/mode.
func (f Fault) is(op faultstore.Op, mode faultstore.Mode) bool {
	return f.Mode == mode && f.Op == op
}

// mayLeaveHeld reports whether, after a nack, the key may legitimately stay
// held until its lease ends: the store never applied the Release (it
// failed), the win was never known to the gateway (the Claim's reply was
// lost), or the body succeeded and its Complete failed (SPEC section 3).
func (f Fault) mayLeaveHeld() bool {
	return f.is(faultstore.Release, faultstore.Fail) ||
		f.is(faultstore.Claim, faultstore.Lost) ||
		f.is(faultstore.Complete, faultstore.Fail)
}

// Outcome is what the sender of one delivery saw.
type Outcome struct {
	// Acked is true when the delivery was acknowledged: a 2xx status
	// reached the client (HTTP, CloudEvents), or Ack was called (pull).
	Acked bool
	// Panic is what came out of the surface, recovered by the driver; nil
	// when nothing did.
	Panic any
	// Detail says what the sender saw, for the cell's report (e.g. "503",
	// "aborted", "Nack").
	Detail string
}

// String renders o for the cell's report, e.g. "nack (503)".
func (o Outcome) String() string {
	verdict := "nack"
	if o.Acked {
		verdict = "ack"
	}
	if o.Detail != "" {
		verdict += " (" + o.Detail + ")"
	}
	return verdict
}

// Harness is one cell's world, built by Surface.Cell: a gateway over Store
// guarding the message keyed Key, and the surface's driver.
type Harness struct {
	Store *faultstore.Store // the gateway's store
	Key   string            // the key of the message every delivery carries
	Lease time.Duration     // the gateway's lease
	Log   *logtest.Sink     // the gateway's and the adapter's log lines

	// Deliver delivers one copy of the message and returns what the sender
	// saw once the surface has finished with it (its claim settled). The
	// handler calls body.Enter first, then behaves as b. Cancelling ctx is
	// the caller going away (the client disconnects, Receive stops).
	Deliver func(ctx context.Context, b Behaviour, body *Body) Outcome

	// Advance lets d pass on every clock the gateway and the store use.
	Advance func(d time.Duration)

	// AwaitRenewal returns once a body that holds its key has had its
	// chance to renew the lease after Advance. Nil when Advance already
	// gives it (testing/synctest).
	AwaitRenewal func()

	// Patience bounds every wait for an event; under testing/synctest it is
	// fake time and may be long.
	Patience time.Duration
}

// Surface describes one delivery surface to Run.
type Surface struct {
	// Behaviours are the rows that make sense on the surface.
	Behaviours []Behaviour

	// SlowDelay is the delay of each leg of each store operation in the
	// slow column.
	SlowDelay time.Duration

	// Cell builds a fresh world for one cell, with a faultstore whose
	// Options.Delay is delay, and calls test in it (inside the bubble,
	// under testing/synctest).
	Cell func(t *testing.T, delay time.Duration, test func(t *testing.T, h *Harness))

	// SparseOverlap limits the check of invariant 2 (a second copy while
	// the first body runs, after time moved past the lease) to the cells
	// where the body's run differs from that of ok/none: the outlives row,
	// and the none and slow columns. The other faults strike before or
	// after the body. For surfaces whose lease renews on the real clock, so
	// that each check costs real time; a fake clock checks every cell.
	SparseOverlap bool

	// PanicAllowed reports whether p may come out of the surface when the
	// handler behaves as b: what the surface documents.
	PanicAllowed func(b Behaviour, p any) bool
}

// NewGateway returns a gateway over a faultstore over inner, whose every
// operation is delayed by delay each way, and the sink the gateway logs
// to (opts.Logger is replaced). A nil inner means a fresh memstore on the
// default clock, which is fake inside a testing/synctest bubble.
func NewGateway(t testing.TB, inner store.Store, delay time.Duration, opts gateway.Options) (*gateway.Gateway, *faultstore.Store, *logtest.Sink) {
	t.Helper()
	if inner == nil {
		mem, err := memstore.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		inner = mem
	}
	st := faultstore.New(inner, &faultstore.Options{Delay: delay})
	log := &logtest.Sink{}
	opts.Logger = log.Logger()
	g, err := gateway.New(st, &opts)
	if err != nil {
		t.Fatal(err)
	}
	return g, st, log
}
