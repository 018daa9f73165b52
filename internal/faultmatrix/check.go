package faultmatrix

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/faultstore"
	"github.com/idemgate/idemgate/store"
)

// Run runs every cell of s's rows × Faults as the subtest
// "<behaviour>/<fault>".
func Run(t *testing.T, s Surface) {
	t.Helper()
	for _, b := range s.Behaviours {
		for _, f := range Faults {
			t.Run(string(b)+"/"+f.Name, func(t *testing.T) {
				var delay time.Duration
				if f.Slow {
					delay = s.SlowDelay
				}
				s.Cell(t, delay, func(t *testing.T, h *Harness) { Check(t, &s, h, b, f) })
			})
		}
	}
}

// Check runs the cell b/f of s in the world h, reporting to t. Run calls
// it for every cell; it is exported for the tests of the checker itself.
func Check(t testing.TB, s *Surface, h *Harness, b Behaviour, f Fault) {
	t.Helper()
	c := &cell{t: t, s: s, h: h, b: b, f: f, tally: &tally{}}
	c.run()
}

// cell is the state of one cell's check.
type cell struct {
	t     testing.TB
	s     *Surface
	h     *Harness
	b     Behaviour
	f     Fault
	tally *tally
	seen  []string // what each delivery saw, for the report
}

// failf reports a broken invariant, naming the cell.
func (c *cell) failf(rule, format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("cell %s/%s: invariant %s: %s", c.b, c.f.Name, rule, fmt.Sprintf(format, args...))
}

// The invariants, as failure messages name them.
const (
	ruleAckDone   = "1 (an ack means DONE)"
	ruleOneAtOnce = "2 (a body never runs twice at once)"
	ruleClaimable = "3 (a nack leaves the key claimable)"
	rulePanics    = "4 (nothing panics out but what is documented)"
	ruleNonVacant = "ok/none (a clean delivery acks and runs the body once)"
)

// run is the check of one cell: deliver, probe, redeliver.
func (c *cell) run() {
	h := c.h
	if c.f.Mode != 0 {
		h.Store.Arm(c.f.Op, c.f.Mode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// 1. The first delivery, whose body is held once it starts.
	first := c.tally.newBody(true)
	defer first.Release() // whatever fails below, no body is left waiting
	done1 := make(chan Outcome, 1)
	go func() { done1 <- h.Deliver(ctx, c.b, first) }()
	var o1 Outcome
	select {
	case <-first.started:
		// 2. While the body runs: the caller may go away, time passes well
		// beyond the lease, and a second copy arrives.
		if c.b == Outlives {
			cancel()
			c.await(first.done(), "the body's context to end after its caller's")
		}
		if c.overlaps() {
			c.overlap(first)
		}
		first.Release()
		o1 = c.awaitOutcome(done1, "the first delivery")
	case o1 = <-done1:
	case <-time.After(h.Patience):
		c.t.Fatalf("cell %s/%s: the first delivery neither ran its body nor ended within %v", c.b, c.f.Name, h.Patience)
	}
	unfired := h.Store.Disarm()
	c.note("first", o1)
	c.checkPanic("first", o1)
	c.checkAck("first", o1, true)

	// 3. After a nack, the key must come free for the next delivery.
	if !o1.Acked {
		c.checkClaimable()
	}
	if c.b == OK && c.f.Name == "none" {
		c.checkNotVacuous(o1)
	}
	c.tally.mu.Lock()
	most, runs := c.tally.most, c.tally.runs
	c.tally.mu.Unlock()
	if most > 1 {
		c.failf(ruleOneAtOnce, "%d bodies ran at once", most)
	}
	fault := "fired"
	switch {
	case c.f.Mode == 0:
		fault = "none armed"
	case len(unfired) > 0:
		fault = "not reached (" + c.f.Op.String() + " was never called)"
	}
	c.t.Logf("cell %s/%s: fault %s; body runs %d; deliveries: %s", c.b, c.f.Name, fault, runs, strings.Join(c.seen, "; "))
}

// overlaps reports whether the cell checks invariant 2 while its first
// body runs. The store faults of the other columns strike before or after
// the body, never while it runs.
func (c *cell) overlaps() bool {
	return !c.s.SparseOverlap || c.b == Outlives || c.f.Mode == 0
}

// overlap delivers a second copy while first is held, after time has passed
// well beyond the lease: renewal must have kept the claim, so the second
// copy must not run its body.
func (c *cell) overlap(first *Body) {
	h := c.h
	h.Advance(3 * h.Lease)
	if h.AwaitRenewal != nil {
		h.AwaitRenewal()
		// On the real clock a loaded machine can delay a renewal past the
		// lease; the gateway then says so and cancels the body, which a held
		// body ignores. That is the body's fault, not the library's: skip.
		// A renewal that stops silently is still caught.
		if len(h.Log.Records().Level(slog.LevelError).Containing("claim lost while the work ran")) > 0 {
			c.t.Logf("cell %s/%s: the renewal lost the claim on the real clock (a loaded machine?); invariant 2 not checked", c.b, c.f.Name)
			return
		}
	}
	second := c.tally.newBody(false)
	o2 := h.Deliver(context.Background(), OK, second)
	c.note("second, while the first ran", o2)
	c.checkPanic("second", o2)
	if second.Started() {
		c.failf(ruleOneAtOnce, "a second delivery ran its body while the first body still ran, %v after the first claimed (lease %v)", 3*h.Lease, h.Lease)
	}
	c.checkAck("second", o2, false)
}

// checkClaimable redelivers after a nack: the body must run (or the
// delivery be acked as a duplicate of a DONE record) at once, unless the
// fault may leave the key held, and once the lease has ended in any case.
func (c *cell) checkClaimable() {
	h := c.h
	o3 := c.redeliver("redelivery at once")
	if o3.Acked {
		return
	}
	if !c.f.mayLeaveHeld() {
		c.failf(ruleClaimable, "the delivery after a nack was refused (%v) although the store applied every operation; the key must be claimable at once", o3)
	}
	h.Advance(h.Lease + h.Lease/2)
	if o4 := c.redeliver("redelivery after the lease"); !o4.Acked {
		c.failf(ruleClaimable, "once the lease had ended the redelivery was still refused (%v)", o4)
	}
}

// redeliver delivers a clean copy whose body does not wait, and checks it.
func (c *cell) redeliver(what string) Outcome {
	o := c.h.Deliver(context.Background(), OK, c.tally.newBody(false))
	c.note(what, o)
	c.checkPanic(what, o)
	c.checkAck(what, o, false)
	return o
}

// checkAck checks invariant 1 after delivery what: an ack needs a DONE
// record. first says whether this is the delivery the fault was armed for.
func (c *cell) checkAck(what string, o Outcome, first bool) {
	if !o.Acked {
		return
	}
	status := c.probe()
	if status == store.AlreadyDone {
		return
	}
	if first && c.f.is(faultstore.Complete, faultstore.Fail) && status == store.HeldByOther {
		// SPEC section 3: once the body has succeeded, the gateway never
		// turns a store problem into a retry: a failed Complete is logged
		// at ERROR and the delivery is acked, because a retry would repeat
		// an irreversible effect. The record stays CLAIMED until its lease
		// ends, and a redelivery after that would run the body again. What
		// must hold meanwhile: the key is not claimable while the lease
		// lives (the probe found it held), and the ERROR line is written.
		if len(c.h.Log.Records().Level(slog.LevelError).Outcome(gateway.OutcomeCompleteError)) == 0 {
			c.failf(ruleAckDone, "the %s delivery was acked with the record CLAIMED after a failed Complete (SPEC section 3 exception), but no ERROR line with outcome %q was logged", what, gateway.OutcomeCompleteError)
		}
		c.seen = append(c.seen, "acked with the record still CLAIMED (SPEC section 3 exception)")
		return
	}
	c.failf(ruleAckDone, "the %s delivery was acked (%v) but the record is not DONE: a fresh Claim answers %v", what, o, status)
}

// probe reads the record back with a Claim by a fresh caller on the store
// behind the faults, and gives up at once a claim it won.
func (c *cell) probe() store.Status {
	ctx := context.Background()
	inner := c.h.Store.Inner()
	pc, err := inner.Claim(ctx, c.h.Key, c.h.Lease, store.ClaimOptions{})
	if err != nil {
		c.t.Fatalf("cell %s/%s: probe Claim: %v", c.b, c.f.Name, err)
	}
	if pc.Status == store.Won {
		if err := inner.Release(ctx, pc); err != nil {
			c.t.Fatalf("cell %s/%s: probe Release: %v", c.b, c.f.Name, err)
		}
	}
	return pc.Status
}

// checkPanic checks invariant 4 for one delivery.
func (c *cell) checkPanic(what string, o Outcome) {
	if o.Panic != nil && !c.s.PanicAllowed(c.b, o.Panic) {
		c.failf(rulePanics, "the %s delivery panicked out of the surface with %v", what, o.Panic)
	}
}

// checkNotVacuous checks that ok/none acks and runs the body once.
func (c *cell) checkNotVacuous(o Outcome) {
	c.tally.mu.Lock()
	runs := c.tally.runs
	c.tally.mu.Unlock()
	if !o.Acked || runs != 1 {
		c.failf(ruleNonVacant, "got %v with %d body runs, want an ack and 1 run", o, runs)
	}
	if st := c.probe(); st != store.AlreadyDone {
		c.failf(ruleNonVacant, "after a clean ack a fresh Claim answers %v, want %v", st, store.AlreadyDone)
	}
}

func (c *cell) note(what string, o Outcome) {
	c.seen = append(c.seen, what+": "+o.String())
}

// await waits for ch to close, within the harness's patience.
func (c *cell) await(ch <-chan struct{}, what string) {
	c.t.Helper()
	select {
	case <-ch:
	case <-time.After(c.h.Patience):
		c.t.Fatalf("cell %s/%s: waited %v for %s", c.b, c.f.Name, c.h.Patience, what)
	}
}

func (c *cell) awaitOutcome(ch <-chan Outcome, what string) Outcome {
	c.t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(c.h.Patience):
		c.t.Fatalf("cell %s/%s: %s did not end within %v", c.b, c.f.Name, what, c.h.Patience)
		return Outcome{}
	}
}
