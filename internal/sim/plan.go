package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/faultstore"
)

// surface is the way a delivery reaches the service.
type surface uint8

const (
	surfacePush       surface = iota // gateway.Push, a wrapped push body
	surfaceIdempotent                // gateway.Idempotent around an http.Handler
	surfaceCloudEvent                // cloudevent.Wrap, a messagePublished event
	surfacePull                      // pull.Wrap, a received *pubsub.Message
	surfaceCount
)

var surfaceNames = [...]string{"push", "idempotent", "cloudevent", "pull"}

func (s surface) String() string { return surfaceNames[s] }

// behaviour is what the handler does once it has waited (see Attempt.Wait).
type behaviour uint8

const (
	behaveOK     behaviour = iota // writes its effect and succeeds
	behaveFail                    // fails with an error before any effect
	behaveNon2xx                  // answers a non-2xx status (or result) before any effect
	behavePanic                   // panics before any effect
	// behaveForget: an operator forgets the key while the body runs; the
	// body's transaction then finds its claim fenced out and returns
	// store.ErrFenced, as CompleteTx would.
	behaveForget
	// behave2xxFail: the handler answers 2xx first (Idempotent: a status,
	// or a line of progress), then fails before any effect, as planned by
	// Attempt.After2xx; on the other surfaces it fails the same way.
	behave2xxFail
)

var behaviourNames = [...]string{"ok", "fail", "non-2xx", "panic", "forget-then-fenced", "2xx-then-fail"}

// after2xx is how a behave2xxFail handler fails after its 2xx.
type after2xx uint8

const (
	after2xxError after2xx = iota // a non-2xx status (http.Error 500) / an error
	after2xxPanic                 // a panic
	after2xxAbort                 // panic(http.ErrAbortHandler): the connection is cut
)

var after2xxNames = [...]string{"an error", "a panic", "http.ErrAbortHandler"}

// edge names the instant of the store's contract an attempt's store calls
// are made to land on exactly (see Attempt.Edge).
type edge uint8

const (
	edgeNone edge = iota
	// edgeClaim: the Claim waits for the very end of the lease of a live
	// holder it finds (a copy also for the expiry of a DONE record), so
	// that it lands on the instant the key turns reclaimable.
	edgeClaim
	// edgeCompleteLease: Complete waits for the very end of its own
	// claim's lease.
	edgeCompleteLease
	// edgeCompleteExpiry: Complete applies but its reply is lost, and the
	// gateway's retry lands on the very expiry of the DONE record the
	// first call made.
	edgeCompleteExpiry
	// edgeLateClaim: the Claim's reply comes exactly one lease after it
	// was sent, the gateway's own boundary for a claim that may have
	// lapsed.
	edgeLateClaim
)

var edgeNames = [...]string{"none", "Claim at the holder's lease end", "Complete at its lease end", "Complete retried at the DONE record's expiry", "Claim answered exactly a lease late"}

func (b behaviour) String() string { return behaviourNames[b] }

// op names a store operation a fault can be injected into.
type op uint8

const (
	opClaim op = iota
	opComplete
	opRelease
	opExtend
	opCount
)

// opFail is store.Failer's Fail: no fault is drawn for it, but it shares
// its process's pauses and crash.
const opFail = opCount

var opNames = [...]string{"Claim", "Complete", "Release", "Extend", "Fail"}

func (o op) String() string { return opNames[o] }

// faultMode is how an injected store fault fires: faultstore's modes.
type faultMode = faultstore.Mode

const (
	faultNone faultMode = 0
	faultFail           = faultstore.Fail // an error; the operation did not happen
	faultLost           = faultstore.Lost // the operation happened; its reply is lost (an error)
	faultSlow           = faultstore.Slow // the operation happened; its reply comes Delay late
	faultHang           = faultstore.Hang // no reply until the caller's context ends
)

// fault is the fault injected into one operation during one attempt.
type fault struct {
	mode faultMode
	// For fail and lost: the fault fires on every call within For of the
	// attempt's start; zero means the first call only.
	For time.Duration
	// For slow: how late the reply comes.
	Delay time.Duration
}

func (f fault) String() string {
	switch f.mode {
	case faultFail, faultLost:
		if f.For > 0 {
			return fmt.Sprintf("%s for %v", f.mode, f.For)
		}
		return f.mode.String() + " once"
	case faultSlow:
		return fmt.Sprintf("slow by %v", f.Delay)
	}
	return f.mode.String()
}

// crashPoint is where a body's process crashes.
type crashPoint uint8

const (
	crashNone         crashPoint = iota
	crashBeforeEffect            // the process dies before the body writes its effect
	crashAfterEffect             // after the effect, before the body returns
)

// Attempt is everything one delivery of a message does, drawn from the
// message's random source.
type Attempt struct {
	N        int  // the delivery attempt, from 1
	Copy     bool // a copy Pub/Sub sent beside attempt N
	Surface  surface
	Instance int // the process slot that receives it
	// Wait is how long the body works before its effect. While it waits
	// it watches its context: cancelled with gateway.ErrLeaseLost, it
	// bails out, returning nil when BailNil is set and an error otherwise.
	// A cancellation by the caller (the push client gone) is ignored, as
	// a body that finishes its work regardless does.
	Wait    time.Duration
	BailNil bool
	Behave  behaviour
	Crash   crashPoint
	// Stall freezes the body for this long before its effect, as a
	// process paused by the scheduler or a long GC would be.
	Stall time.Duration
	// LostCommit loses the reply of the COMMIT of the body's transaction
	// (with a transactional sink): the body retries the transaction.
	LostCommit bool
	// RepeatableRead runs the body's transaction at REPEATABLE READ, where
	// the sink can (PostgreSQL); by default at the database's default.
	RepeatableRead bool
	Faults         [opCount]fault
	// Zombie: after its stall (past lease + ttl: its record deleted, the
	// key claimed anew) the body tries its lost claim on the store:
	// Extend, Release, Complete, and CompleteTx with a transactional sink.
	Zombie bool
	// Forged, when not zero, sends a forged push request for the message
	// just before this attempt: forgedNoToken or forgedBadToken.
	Forged forgery
	// CopyAfter, when positive, sends a copy of this attempt that long
	// after it.
	CopyAfter time.Duration
	copy      *Attempt
	// Edge lands one of the attempt's store calls on an instant where the
	// contract turns (see edge).
	Edge edge
	// After2xx is how a behave2xxFail handler fails.
	After2xx after2xx
	// Inner moves the body's planned failure inside the verb it takes on
	// another key: its Mutex (Scenario.Mutex) or its nested Lock
	// (Scenario.Nested). The verb must report it.
	Inner bool
	// Stop, on the pull surface, stops Receive (cancels the callback's
	// context) that long after the delivery starts; StopAtClaim stops it
	// as the delivery's Claim is sent instead. StopHonour makes the body,
	// if it runs, stop with the caller (returning the context's error)
	// instead of working on.
	Stop        time.Duration
	StopAtClaim bool
	StopHonour  bool
}

// String describes the attempt for the trace.
func (a *Attempt) String() string {
	var b strings.Builder
	put := func(on bool, format string, args ...any) {
		if on {
			fmt.Fprintf(&b, format, args...)
		}
	}
	put(true, "attempt %d", a.N)
	put(a.Copy, " (copy)")
	put(true, " via %s on process %d: %s", a.Surface, a.Instance, a.Behave)
	put(a.Wait > 0, " after %v", a.Wait)
	put(a.Wait > 0 && a.BailNil, " (bails with nil)")
	put(a.Wait > 0 && !a.BailNil, " (bails with an error)")
	put(a.Stall > 0, ", stall %v", a.Stall)
	put(a.Zombie, ", then tries its lost claim")
	put(a.Forged == forgedNoToken, ", after a forged request without a token")
	put(a.Forged == forgedBadToken, ", after a forged request with a refused token")
	put(a.LostCommit, ", COMMIT reply lost")
	put(a.Behave == behave2xxFail, " (by %s)", after2xxNames[a.After2xx])
	put(a.Edge != edgeNone, ", edge: %s", edgeNames[a.Edge])
	put(a.Inner, ", fails inside its Mutex or nested Lock")
	put(a.StopAtClaim, ", Receive stops as the Claim is sent")
	put(!a.StopAtClaim && a.Stop > 0, ", Receive stops after %v", a.Stop)
	put(a.StopHonour && (a.StopAtClaim || a.Stop > 0), " (the body stops with it)")
	put(a.RepeatableRead, ", REPEATABLE READ")
	put(a.Crash == crashBeforeEffect, ", crash before the effect")
	put(a.Crash == crashAfterEffect, ", crash after the effect")
	for o, f := range a.Faults {
		put(f.mode != faultNone, ", %s %s", op(o), f)
	}
	return b.String()
}

// forgery is how a forged push request presents itself.
type forgery uint8

const (
	forgedNone     forgery = iota
	forgedNoToken          // no Authorization header
	forgedBadToken         // a well-formed token the validator refuses
)

// injectedFailure reports whether the attempt was made to fail: a failing
// handler, a crash, or a store fault.
func (a *Attempt) injectedFailure() bool {
	if a.Behave != behaveOK || a.Crash != crashNone || a.Stall > 0 || a.Edge != edgeNone || a.Inner || a.Stop > 0 || a.StopAtClaim {
		return true
	}
	for _, f := range a.Faults {
		if f.mode != faultNone {
			return true
		}
	}
	return false
}

// excusesRepeat reports whether the attempt makes a second effect for its
// key unavoidable: a crash or stall (the holder vanishes or outlives its
// lease), an operator's Forget, or Complete failing past the lease while
// renewal cannot keep the claim alive.
func (a *Attempt) excusesRepeat(sc *Scenario, t Timing) bool {
	if a.Crash != crashNone || a.Stall > 0 || a.Behave == behaveForget || a.Edge == edgeCompleteLease {
		// edgeCompleteLease: Complete comes as the lease ends, when a
		// redelivery may take the key over first.
		return true
	}
	c := a.Faults[opComplete]
	if c.mode == faultHang || c.For >= t.settle() {
		// Complete cannot succeed within SettleTimeout: the work is acked
		// undone (SPEC section 3) and the key frees when its lease ends.
		return true
	}
	long := c.For >= leaseOf(sc, t)/4 || c.mode == faultSlow && c.Delay >= leaseOf(sc, t)/4
	keptAlive := sc.Renew && a.Faults[opExtend].mode == faultNone
	return c.mode != faultNone && long && !keptAlive
}

// leaseOf is the lease the scenario's gateways use.
func leaseOf(sc *Scenario, t Timing) time.Duration {
	if sc.Renew {
		return t.Lease
	}
	return t.noRenewLease()
}

// chance reports true with probability 1/n.
func (m *Message) chance(n int) bool { return m.rng.IntN(n) == 0 }

// between draws a duration uniformly in [lo, hi) leases.
func (m *Message) between(t Timing, lo, hi float64) time.Duration {
	return time.Duration((lo + m.rng.Float64()*(hi-lo)) * float64(t.Lease))
}

// drawAttempt draws attempt n of m (and the copy it may bring).
func drawAttempt(sc *Scenario, t Timing, m *Message, n int, isCopy bool) *Attempt {
	a := &Attempt{N: n, Copy: isCopy, Surface: surface(m.rng.IntN(int(surfaceCount))), Instance: m.rng.IntN(sc.Instances)}
	if sc.Ordered {
		a.Surface = surfacePull
	}
	if n > stormAttempts {
		return a // the storm has passed: a clean delivery
	}
	defer drawLater(sc, t, m, n, isCopy, a)
	lease := leaseOf(sc, t)
	// How long a body may work: past the lease only where renewal keeps
	// the claim; without renewal a body slower than its lease is a stall,
	// drawn as such.
	maxWait := 2.5
	if !sc.Renew {
		maxWait = 0.3 * float64(t.noRenewLease()) / float64(t.Lease)
	}
	if m.chance(4) {
		a.Wait = m.between(t, 0.1, maxWait)
		a.BailNil = m.chance(2)
	}
	switch {
	case m.chance(10):
		a.Behave = behaveFail
	case m.chance(12):
		a.Behave = behaveNon2xx
	case m.chance(14):
		a.Behave = behavePanic
	}
	for o := range opCount {
		if !m.chance(14) {
			continue
		}
		f := fault{mode: faultMode(1 + m.rng.IntN(4))}
		switch f.mode {
		case faultFail, faultLost:
			if m.chance(3) {
				f.For = m.between(t, 0.1, 0.6)
			}
		case faultSlow:
			f.Delay = m.between(t, 0.01, 0.2)
		}
		a.Faults[o] = f
	}
	if m.chance(25) {
		a.Crash = crashPoint(1 + m.rng.IntN(2))
	}
	if m.chance(30) {
		a.Stall = lease + m.between(t, 0.1, 1)
	}
	if m.chance(40) {
		a.Behave = behaveForget
	}
	if m.chance(12) {
		a.LostCommit = true
	}
	if m.chance(8) {
		a.RepeatableRead = true
	}

	switch sc.Bias {
	case biasConflicts:
		if m.chance(2) {
			a.Wait = m.between(t, 0.5, maxWait)
		}
		if m.chance(3) {
			a.Behave = behaveFail
		}
	case biasLeaseLost:
		if m.chance(2) {
			a.Faults[opExtend] = fault{mode: faultFail, For: 2 * t.Lease}
			a.Wait, a.BailNil = 3*t.Lease, m.chance(2)
		}
	case biasComplete:
		if m.chance(2) {
			a.Faults[opComplete] = fault{mode: faultFail, For: m.between(t, 1.5, 3)}
			a.Faults[opExtend] = fault{}
		}
	case biasForget:
		if m.chance(2) {
			a.Behave = behaveForget
		}
	case biasSlowClaim:
		if m.chance(3) {
			a.Faults[opClaim] = fault{mode: faultSlow, Delay: lease + m.between(t, 0.05, 0.5)}
		}
	case biasCrash:
		switch {
		case m.chance(4):
			a.Crash = crashPoint(1 + m.rng.IntN(2))
		case m.chance(4):
			a.Stall = lease + t.TTL + m.between(t, 0.1, 1)
		}
	}
	if !isCopy && (m.chance(6) || (sc.Bias == biasComplete || sc.Ordered) && m.chance(2)) {
		a.CopyAfter = m.between(t, 0.1, 3)
		a.copy = drawAttempt(sc, t, m, n, true)
	}
	return a
}

// drawLater draws what the families added since the first generator
// decide, after its draws, so that those stay as they were.
func drawLater(sc *Scenario, t Timing, m *Message, n int, isCopy bool, a *Attempt) {
	if sc.Auth && !isCopy && m.chance(3) {
		a.Forged = forgery(1 + m.rng.IntN(2))
	}
	if sc.Ordered && a.copy != nil {
		// The copy that goes first (see world.orderedKey) works a while.
		a.copy.Wait = m.between(t, 0.3, 0.9)
	}
	if sc.Deletion && m.Index == 0 && n == 1 && !isCopy {
		// The zombie: it claims the key, and its process stalls until
		// after the late republish of its order claimed the key anew on
		// a deleted record and wrote its effect.
		a.Stall = t.lateAfter() + 3*t.Lease
		a.Zombie = true
		a.Behave, a.Crash, a.Wait = behaveOK, crashNone, 0
		a.Faults = [opCount]fault{}
		a.CopyAfter, a.copy = 0, nil
		return
	}
	drawReaches(sc, t, m, a)
	drawWaitCopy(sc, t, m, n, isCopy, a)
}

// drawReaches draws what issue 30 added (after every earlier draw): the
// instants where the contract turns, handlers that fail after a 2xx,
// failures inside a Mutex or nested Lock, and pull's Receive stopping.
func drawReaches(sc *Scenario, t Timing, m *Message, a *Attempt) {
	if m.chance(5) {
		a.Edge = edge(1 + m.rng.IntN(4))
		switch a.Edge {
		case edgeCompleteExpiry:
			a.Faults[opComplete] = fault{mode: faultLost}
		case edgeLateClaim:
			a.Faults[opClaim] = fault{mode: faultSlow, Delay: leaseOf(sc, t)}
		}
	}
	if a.Behave == behaveOK && m.chance(10) {
		a.Behave, a.After2xx = behave2xxFail, after2xx(m.rng.IntN(3))
	}
	if (sc.Mutex || sc.Nested) && a.Behave == behaveOK && m.chance(6) {
		a.Inner = true
	}
	if a.Surface == surfacePull && m.chance(4) {
		if m.chance(3) {
			a.StopAtClaim = true
		} else {
			a.Stop = m.between(t, 0, 1.5)
		}
		a.StopHonour = m.chance(2)
	}
}
