package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
)

// The rules of issue 32's failures; see docs/testing.md, "Model and rules".
const (
	ruleFailedRun = "failed-run" // a body started on a FAILED key that was not retried since
	ruleFailedAck = "failed-ack" // a delivery of a key whose work failed acked as done, or acked with AckFailed on a key not FAILED
	ruleRetryOnce = "retry-once" // a retried key's work succeeded twice between two Retries
	ruleBudget    = "budget"     // more counted failures than MaxAttempts, or a count a Retry should have cleared
	// ruleNotFailure: a failure counted for a body whose work did not
	// fail: its Mutex or nested Lock met a live holder, or the consumer
	// stopped it (pull Receive ending).
	ruleNotFailure = "not-a-failure"
	// ruleFailedConflict: another payload than the one whose work failed,
	// meeting its key FAILED, was not refused as a conflict.
	ruleFailedConflict = "failed-conflict"
)

// errPoison is what a poison message's body fails with, marked
// gateway.Permanent when its failure is final.
var errPoison = errors.New("sim: the message is poison: its work can never succeed")

// failState is what the checker knows of a key's failures. Guarded by
// w.mu, like the keyState that holds it.
type failState struct {
	poison bool // a message of the key is poison
	final  bool // and its body's failure is marked gateway.Permanent
	fixed  bool // an operator fixed what made it fail, and retried it
	// failedFence is the fence of the FAILED record a Fail made, 0 when
	// the key is not FAILED as far as the checker knows (never, or
	// retried since); failedUntil is the earliest its record may expire.
	failedFence int64
	failedUntil time.Time
	// retries counts the operator's Retries (and Forgets) begun: each
	// starts the key's budget afresh.
	retries int
	// counted are the fences whose failure the store counted since the
	// last Retry or Forget, and successes the bodies that wrote their
	// effect since the last Retry.
	counted   map[int64]bool
	successes int
}

// drawFailures draws what issue 32 added to a scenario, after every other
// draw so that those stay as they were: a wait for the holder in one seed
// of three, and in another third the failures: poison messages (whose
// work fails, for good or each time), an attempt budget, AckFailed on the
// gateway or on the push routes only, and an operator who retries FAILED
// keys now and then.
func drawFailures(s *Scenario, r *rand.Rand) {
	if r.IntN(3) == 0 {
		s.WaitForHolder = 0.2 + 1.3*r.Float64()
	}
	if r.IntN(3) != 0 {
		return
	}
	s.Failures = true
	s.MaxAttempts = []int{0, 2, 3, 4}[r.IntN(4)]
	s.AckFailed = r.IntN(3) == 0
	s.RouteAckFailed = r.IntN(4) == 0
	s.Operator = r.IntN(3) != 0
	for _, m := range s.Messages {
		m.Poison = r.IntN(3) == 0
		m.PoisonFinal = r.IntN(2) == 0
	}
	// Drawn after the rest: under a budget, bodies meet each other in
	// their Mutex, which is contention, not a failure of the work.
	if s.MaxAttempts > 0 && r.IntN(3) == 0 {
		s.Mutex = true
	}
}

// drawWaitCopy sends, under WaitForHolder, a copy of some attempts close
// behind them, so that the copy meets the attempt's claim held and waits
// for it to settle.
func drawWaitCopy(sc *Scenario, t Timing, m *Message, n int, isCopy bool, a *Attempt) {
	if sc.WaitForHolder > 0 && !isCopy && a.copy == nil && m.chance(3) {
		a.CopyAfter = m.between(t, 0.01, 0.6)
		a.copy = drawAttempt(sc, t, m, n, true)
	}
}

// failures returns key's failState, creating it. Called with w.mu held.
func (w *world) failures(key string) *failState {
	ks := w.key(key)
	if ks.fail == nil {
		ks.fail = &failState{}
	}
	return ks.fail
}

// gatewayFailures sets the failure options of a process's gateway: the
// scenario's, when the store keeps failures.
func (w *world) gatewayFailures(o *gateway.Options) {
	o.WaitForHolder = time.Duration(w.sc.WaitForHolder * float64(w.t.Lease))
	if w.fail == nil {
		return
	}
	o.MaxAttempts, o.AckFailed, o.Terminal = w.sc.MaxAttempts, w.sc.AckFailed, terminal
}

// routeAckFailed is the push routes' AckFailed: the gateway's, or the
// other one when the scenario says so.
func (w *world) routeAckFailed() *bool {
	if w.fail == nil || !w.sc.RouteAckFailed {
		return nil
	}
	return new(!w.sc.AckFailed)
}

// ackFailed reports whether d's surface acknowledges the deliveries of a
// FAILED key.
func (w *world) ackFailed(d *delivery) bool {
	if w.fail == nil {
		return false
	}
	if d.a.Surface == surfacePush || d.a.Surface == surfaceIdempotent {
		return w.sc.AckFailed != w.sc.RouteAckFailed
	}
	return w.sc.AckFailed
}

// terminal is the routes' Terminal: an Idempotent handler's 422 is a
// poison body's, which can never succeed.
func terminal(err error) bool {
	code, ok := gateway.HandlerStatus(err)
	return ok && code == http.StatusUnprocessableEntity
}

// poison fails d's body if its key is poison and no operator fixed it.
func (w *world) poison(d *delivery) error {
	w.mu.Lock()
	fs := w.failures(d.ms.key)
	poison, final := fs.poison && !fs.fixed, fs.final
	if poison {
		d.failed, d.poisoned = true, true
	}
	w.mu.Unlock()
	switch {
	case !poison:
		return nil
	case final:
		w.tracef(d, "body fails: poison, for good (gateway.Permanent)")
		return gateway.Permanent(errPoison)
	}
	w.tracef(d, "body fails: poison")
	return errPoison
}

// failFaulty is faulty over a store that keeps failures: the gateway sees
// a store.Failer, and the checker every Fail's answer.
type failFaulty struct {
	*faulty
}

var _ store.Failer = failFaulty{}

// Fail passes through, sharing the process's pauses and crash, and is
// checked by failAnswered.
func (f failFaulty) Fail(ctx context.Context, c store.Claim, fl store.Failure) (n int, failed bool, err error) {
	err = f.do(ctx, opFail, c.Key, func() (err error) {
		start := time.Now()
		n, failed, err = f.w.fail.Fail(ctx, c, fl)
		if err == nil {
			f.w.failAnswered(deliveryFrom(ctx), c, start, n, failed)
		}
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return n, failed, nil
}

func (f failFaulty) Retry(ctx context.Context, key string) (bool, error) {
	return f.w.fail.Retry(ctx, key)
}

// failAnswered checks the store's answer to a Fail of c, sent at start,
// against the failures counted since the key's last Retry, and notes a
// FAILED record.
func (w *world) failAnswered(d *delivery, c store.Claim, start time.Time, n int, failed bool) {
	w.mu.Lock()
	fs := w.failures(c.Key)
	fresh := n > 0 && !fs.counted[c.Fence]
	if fresh {
		if fs.counted == nil {
			fs.counted = map[int64]bool{}
		}
		fs.counted[c.Fence] = true
	}
	k := len(fs.counted)
	if failed && fs.failedFence != c.Fence {
		// The record expires a ttl after the Fail applied, which is no
		// earlier than it was sent.
		fs.failedFence, fs.failedUntil = c.Fence, start.Add(w.t.TTL)
	}
	if d != nil && c.Key == d.ms.key && failed {
		d.gaveUp = true
	}
	w.mu.Unlock()
	w.tracef(d, "store: Fail of fence %d: %d failed attempts, FAILED %v", c.Fence, n, failed)
	if why := notAFailure(d, c); fresh && why != "" {
		w.violateKey(c.Key, ruleNotFailure, fmt.Sprintf("%s: the store counts a failure of fence %d (%d counted, FAILED %v), but the work did not fail: %s", whoOf(d), c.Fence, n, failed, why))
	}
	switch {
	case !fresh:
	case w.sc.MaxAttempts > 0 && n > w.sc.MaxAttempts && w.fail != nil:
		w.violateKey(c.Key, ruleBudget, fmt.Sprintf("%s: the failure of fence %d is the %d-th counted since the key's last Retry: more failed runs than MaxAttempts (%d)", whoOf(d), c.Fence, n, w.sc.MaxAttempts))
	case n > k:
		w.violateKey(c.Key, ruleBudget, fmt.Sprintf("%s: the store counts %d failed attempts at fence %d, but only %d runs failed since the key's last Retry: a Retry starts a fresh budget", whoOf(d), n, c.Fence, k))
	}
	if fresh && !failed {
		// A counted failure is a Release: the fence rises.
		rec, live, err := w.insp.Inspect(context.Background(), c.Key)
		if err == nil && live && rec.State == store.Claimed && rec.Fence == c.Fence {
			w.violateKey(c.Key, ruleFence, fmt.Sprintf("%s: a counted failure freed the claim of fence %d without raising its fence: the record is %s", whoOf(d), c.Fence, w.describe(rec, live)))
		}
	}
}

// checkFailedStart: a body never starts on a claim sent while its key's
// record was FAILED (and not retried since) and could not have expired.
// Called with w.mu held.
func (w *world) checkFailedStart(d *delivery, c store.Claim) string {
	fs := w.key(d.ms.key).fail
	if fs == nil || fs.failedFence == 0 || c.Fence <= fs.failedFence {
		return ""
	}
	slack := time.Duration(0)
	if !w.b.Fake {
		slack = w.t.Lease / 10
	}
	if !d.claimAt.Before(fs.failedUntil.Add(-slack)) {
		return "" // the FAILED record may have expired: the key is free
	}
	return fmt.Sprintf("body with fence %d starts on a key FAILED at fence %d, which no operator retried since: its work must not run again", c.Fence, fs.failedFence)
}

// wroteAfterRetry counts a success of a retried key: one between two
// Retries. Called with w.mu held.
func (w *world) wroteAfterRetry(d *delivery) string {
	ks := w.key(d.ms.key)
	fs := ks.fail
	if fs == nil || fs.retries == 0 {
		return ""
	}
	fs.successes++
	if fs.successes > 1 && !ks.excused {
		return fmt.Sprintf("the work of the retried key succeeded %d times since its last Retry: a Retry runs it once", fs.successes)
	}
	return ""
}

// checkFailedAck checks the ack of d, a delivery whose work failed for
// good or that met the key FAILED: only AckFailed acknowledges it, and
// only while the record is FAILED (or an operator retried it since).
func (w *world) checkFailedAck(d *delivery, how string, rec store.Record, live bool) {
	w.mu.Lock()
	retried := w.failures(d.ms.key).retries > d.retriesAtClaim
	d.ms.ackedFailed = true
	w.mu.Unlock()
	switch {
	case !w.ackFailed(d):
		w.violate(d, ruleFailedAck, fmt.Sprintf("acked (%s) a delivery of a key whose work failed for good, without AckFailed: the record is %s", how, w.describe(rec, live)))
	case !retried && !(live && rec.State == store.Failed):
		w.violate(d, ruleFailedAck, fmt.Sprintf("acked (%s) with AckFailed a delivery of a key whose record is %s, not FAILED", how, w.describe(rec, live)))
	default:
		w.tracef(d, "acked with AckFailed: the key's work failed for good")
	}
}

// operate is the operator: every few leases it lists the FAILED keys and
// retries some, most of them after fixing what made them fail (a poison
// key then succeeds), until the run ends.
func (w *world) operate() {
	defer w.all.Done()
	rng := rand.New(rand.NewPCG(w.sc.Seed, 0x0ffe))
	ctx := context.Background()
	for w.sleep(time.Duration((2 + 6*rng.Float64()) * float64(w.t.Lease))) {
		w.mu.Lock()
		keys := make([]string, 0, len(w.keys))
		for k := range w.keys {
			keys = append(keys, k)
		}
		w.mu.Unlock()
		slices.Sort(keys)
		for _, k := range keys {
			rec, live, err := w.insp.Inspect(ctx, k)
			if err != nil || !live || rec.State != store.Failed || rng.IntN(2) == 0 {
				continue
			}
			fixed := rng.IntN(3) != 0
			// The checker forgets the FAILED record before the store
			// does: a Claim may win the key as soon as Retry applies.
			w.mu.Lock()
			fs := w.failures(k)
			fs.retries++
			fs.failedFence, fs.counted, fs.successes = 0, nil, 0
			fs.fixed = fs.fixed || fixed
			w.mu.Unlock()
			ok, err := w.fail.Retry(ctx, k)
			w.tracef(nil, "operator: Retry(%s) = %v, %v (the cause fixed: %v)", k, ok, err, fixed)
		}
	}
}

// forgetClearsFailures: an operator's Forget clears the key's count too.
// Called with w.mu held.
func (w *world) forgetClearsFailures(key string) {
	fs := w.failures(key)
	fs.retries++
	fs.failedFence, fs.counted = 0, nil
}

// metFailure reports whether d's attempt met its key's failure: its body
// was poison, its failure made the record FAILED, or it found the record
// FAILED. Such an attempt is a real failure. Called with w.mu held.
func (d *delivery) metFailure() bool { return d.poisoned || d.gaveUp || d.metFailed }

// notAFailure says why the Fail of c, made for d, counts no failure of
// the work ("" when it does): d's body did not fail as planned, and its
// Mutex or nested Lock met a live holder, or the consumer stopped it.
// Contention is paced, and a stop is the consumer's doing, not the
// message's: neither spends the attempt budget.
func notAFailure(d *delivery, c store.Claim) string {
	if d == nil || c.Key != d.ms.key {
		return ""
	}
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	switch {
	case d.failed && !d.stopFail:
		return ""
	case d.contended:
		return "its Mutex or nested Lock met a live holder"
	case d.stopped:
		return "its pull Receive stopped, cancelling the callback"
	}
	return ""
}

// checkFailedConflict: a delivery whose Claim met its key FAILED under
// another payload's fingerprint is a conflict first (OnConflict, a
// conflict outcome; in progress when AcceptConflicts, which accepts only
// done work), never acked: the work it asks for never ran.
func (w *world) checkFailedConflict(d *delivery, acked bool, how string) {
	w.mu.Lock()
	stored, outcome := d.failedFP, d.outcome
	w.mu.Unlock()
	if d.ms.fp == nil || len(stored) == 0 || bytes.Equal(stored, d.ms.fp) || outcome == "store_error" || outcome == "cancelled" {
		return // no conflict, or the gateway never had the Claim's answer (a lost reply, a late one)
	}
	ok := outcome == "conflict" || outcome == "in_progress" && w.sc.AcceptConflicts
	switch {
	case acked:
		w.violate(d, ruleFailedConflict, fmt.Sprintf("acked (%s, outcome %s) a payload other than the one whose work failed, on its FAILED key: the message is dropped unrun", how, outcome))
	case !ok:
		w.violate(d, ruleFailedConflict, fmt.Sprintf("a payload other than the one whose work failed met its key FAILED and was answered %s (outcome %s), not as a conflict", how, outcome))
	}
}
