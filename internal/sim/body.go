package sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
)

// The failures a body returns.
var (
	errHandler = errors.New("sim: the handler failed")
	errNon2xx  = errors.New("sim: the handler answered non-2xx")
	errBailed  = errors.New("sim: the handler stopped: lease lost")
	errInner   = errors.New("sim: the handler failed inside its Mutex or nested Lock")
)

// panicValue is what a panicking body panics with.
const panicValue = "sim: the handler panicked"

// The bodies of the four surfaces: each runs work and answers its result
// the way its surface expects.

func (w *world) pushBody(ctx context.Context, _ *pushenvelope.Message) error {
	return w.work(ctx)
}

func (w *world) idempotentBody(rw http.ResponseWriter, r *http.Request) {
	if a := deliveryFrom(r.Context()).a; a.Behave == behave2xxFail {
		// A 2xx first, then the failure (work plans it): the status, or
		// the 200 of a first line of progress.
		if a.N%2 == 0 {
			rw.WriteHeader(http.StatusOK)
		} else {
			rw.Write([]byte("working\n"))
		}
	}
	err := w.work(r.Context())
	switch {
	case err == nil:
		if deliveryFrom(r.Context()).a.N%2 == 0 {
			rw.WriteHeader(http.StatusNoContent)
		} // otherwise write nothing: 200
	case errors.Is(err, errNon2xx):
		http.Error(rw, "payment required", http.StatusPaymentRequired)
	case gateway.IsPermanent(err): // the route's Terminal knows it by its 422
		http.Error(rw, "unprocessable", http.StatusUnprocessableEntity)
	case errors.Is(err, store.ErrFenced):
		http.Error(rw, "fenced out", http.StatusServiceUnavailable)
	default:
		http.Error(rw, err.Error(), http.StatusInternalServerError)
	}
}

func (w *world) cloudEventBody(ctx context.Context, _ event.Event) error {
	err := w.work(ctx)
	if errors.Is(err, errNon2xx) {
		return cehttp.NewResult(http.StatusServiceUnavailable, "%s", "supplier unavailable")
	}
	if err == nil && deliveryFrom(ctx).a.N%2 == 0 {
		return cehttp.NewResult(http.StatusNoContent, "%s", "done")
	}
	return err
}

func (w *world) pullBody(ctx context.Context, _ *pubsub.Message) error {
	return w.work(ctx)
}

// work is every handler's body: it does what its attempt planned. Its
// steps, in order: a stall; the work before the effect (Wait), during which
// it bails out if its lease is lost; the planned failure; a crash; a nested
// Lock; the effect, through the fence-checking ledger or the transactional
// sink; a crash after it.
func (w *world) work(ctx context.Context) error {
	d := deliveryFrom(ctx)
	if d.forged {
		w.violate(d, ruleAuth, "the body ran for a forged request")
		return errHandler
	}
	c, ok := gateway.ClaimFromContext(ctx)
	if !ok {
		w.violate(d, ruleHarness, "a body ran without a claim in its context")
		return errHandler
	}
	w.bodyStarts(d, c)
	defer w.bodyEnds(d)
	a := d.a

	if a.Stall > 0 && !w.stall(d) {
		return errGone
	}
	if a.Zombie {
		w.probeLostClaim(ctx, d, c)
	}
	if a.Wait > 0 && !w.sc.Mutex {
		if err := w.busy(ctx, d, a.Wait); err == errBailedNil {
			return nil
		} else if err != nil {
			return err
		}
	}
	if d.proc.crashed() {
		return w.dead(d)
	}
	if err := w.poison(d); err != nil {
		return err
	}
	if a.Behave == behaveForget {
		return w.forgetThenCommit(ctx, d, c)
	}
	if a.Behave != behaveOK {
		w.failed(d)
		after := ""
		if a.Behave == behave2xxFail {
			after = " after its 2xx"
		}
		switch {
		case a.Behave == behaveNon2xx:
			w.tracef(d, "body answers non-2xx")
			return errNon2xx
		case a.Behave == behavePanic || a.Behave == behave2xxFail && a.After2xx == after2xxPanic:
			w.tracef(d, "body panics%s", after)
			panic(panicValue)
		case a.Behave == behave2xxFail && a.After2xx == after2xxAbort:
			w.tracef(d, "body cuts the connection after its 2xx (http.ErrAbortHandler)")
			panic(http.ErrAbortHandler)
		}
		w.tracef(d, "body fails%s", after)
		return errHandler
	}
	if a.Crash == crashBeforeEffect {
		w.crash(d.proc, d)
		return w.dead(d)
	}
	if w.sc.Nested {
		nk := "welcome:" + w.b.Prefix + d.ms.m.Customer
		ran := false
		err := d.proc.g.Lock(ctx, nk, func(context.Context) error {
			if !a.Inner || w.sc.Mutex {
				return nil
			}
			ran = true
			w.failed(d)
			w.tracef(d, "body fails inside its nested Lock")
			return errInner
		})
		w.noteText(d, "the nested Lock's error", err)
		if ran && !errors.Is(err, errInner) {
			w.violate(d, ruleSwallowed, fmt.Sprintf("the nested Lock of a body that failed inside it returned %v, not the body's error", err))
		}
		if err != nil && !errors.Is(err, gateway.ErrDuplicate) {
			if errors.Is(err, gateway.ErrInProgress) {
				// A live holder of the nested key: a real failure, which
				// may dead-letter the message as any in-progress answer.
				w.mu.Lock()
				d.held, d.contended = true, true
				w.mu.Unlock()
			}
			w.tracef(d, "body fails: nested Lock of %s: %v", nk, err)
			return fmt.Errorf("nested lock: %w", err)
		}
	}
	effect := w.effect
	if w.sc.Mutex {
		effect = w.mutexEffect
	}
	if err := effect(ctx, d, c); err != nil {
		return err
	}
	if a.Crash == crashAfterEffect {
		w.crash(d.proc, d)
		return w.dead(d)
	}
	w.mu.Lock()
	d.ok = true
	w.mu.Unlock()
	w.tracef(d, "body succeeds")
	return nil
}

// busy is the body's work before its effect: it takes dur, unless the
// lease is lost first (the body bails out as planned) or the process
// crashes (the body freezes). A cancellation by the caller is ignored: the
// body finishes its work regardless, as one that calls something without
// a context would; the renewal still guards its claim.
func (w *world) busy(ctx context.Context, d *delivery, dur time.Duration) error {
	t := time.NewTimer(dur)
	defer t.Stop()
	done := ctx.Done()
	for {
		select {
		case <-t.C:
			return nil
		case <-d.proc.dead:
			return w.dead(d)
		case <-done:
			if errors.Is(context.Cause(ctx), gateway.ErrLeaseLost) {
				if d.a.BailNil {
					w.tracef(d, "body bails out with nil: %v", context.Cause(ctx))
					return errBailedNil
				}
				w.tracef(d, "body bails out with an error: %v", context.Cause(ctx))
				return errBailed
			}
			if d.a.StopHonour && w.stopped(d) {
				w.failed(d)
				w.mu.Lock()
				d.stopFail = true
				w.mu.Unlock()
				w.tracef(d, "body stops with Receive: %v", context.Cause(ctx))
				return fmt.Errorf("sim: the handler stopped with Receive: %w", context.Cause(ctx))
			}
			w.tracef(d, "body's caller is gone (%v); it works on", context.Cause(ctx))
			if d.a.Faults[opExtend].mode != faultNone {
				// The body can no longer learn that its lease is lost:
				// it may outlive it, as any body deaf to its context.
				w.freeze(d, "works on deaf to its context")
			}
			done = nil
		}
	}
}

// stall pauses d's whole process for d's planned stall (a stop-the-world
// pause, a frozen VM): the body, and every store call of the process,
// renewals included. Every holder of the process may then outlive its
// lease: each is a zombie from here on. It reports false if the run ended
// first.
func (w *world) stall(d *delivery) bool {
	w.freeze(d, fmt.Sprintf("stalls for %v with its process", d.a.Stall))
	w.mu.Lock()
	for o := range d.proc.inflt {
		ks := w.key(o.ms.key)
		ks.excused = true
		delete(ks.running, o)
		o.frozen = true
	}
	w.mu.Unlock()
	d.proc.pause(time.Now().Add(d.a.Stall))
	if !w.sleep(d.a.Stall) {
		return false
	}
	w.tracef(d, "body resumes after its stall")
	return true
}

// errBailedNil is busy's signal that the body returns nil without its
// work; work turns it into nil.
var errBailedNil = errors.New("sim: bail out with nil")

// forgetThenCommit is an operator's Forget of the key while the body runs,
// then the body's transaction, which finds its claim fenced out.
func (w *world) forgetThenCommit(ctx context.Context, d *delivery, c store.Claim) error {
	// Forget frees the key under its holders on purpose: from here on
	// they are zombies, beside which the next claim may run.
	w.mu.Lock()
	ks := w.key(d.ms.key)
	ks.excused, ks.forgotten = true, true
	ks.forgetsBegun++
	w.forgetClearsFailures(d.ms.key)
	for o := range ks.running {
		delete(ks.running, o)
		// Its claim is gone: a real failure of its attempt, which Pub/Sub
		// lets later messages overtake.
		o.frozen, o.struck = true, true
	}
	w.mu.Unlock()
	ok, err := w.insp.Forget(context.WithoutCancel(ctx), c.Key)
	w.tracef(d, "operator: Forget(%s) = %v, %v", c.Key, ok, err)
	// A claim won before the Forget whose body registers only after the
	// loop above was freed too: bodyStarts knows it by the count.
	w.mu.Lock()
	ks.forgetsEnded++
	w.mu.Unlock()
	if w.b.Tx != nil {
		err := w.b.Tx.Commit(ctx, c)
		w.tracef(d, "body's transaction: %v", err)
		if err == nil {
			w.markWrote(d)
			w.violate(d, ruleHarness, "CompleteTx committed a claim that an operator forgot")
			return nil
		}
		w.noteFenced(d, err)
		return err
	}
	// What CompleteTx would check: the record still CLAIMED under our
	// fence and token.
	rec, live, err := w.insp.Inspect(context.WithoutCancel(ctx), c.Key)
	if err == nil && live && rec.State == store.Claimed && rec.Fence == c.Fence && rec.Token == c.Token {
		return w.effect(ctx, d, c)
	}
	err = fmt.Errorf("sim: transaction: fence %d no longer owns its record: %w", c.Fence, store.ErrFenced)
	w.tracef(d, "body's transaction finds its claim fenced out; returns ErrFenced")
	w.noteFenced(d, err)
	return err
}

// effect writes the body's effect under claim c.
func (w *world) effect(ctx context.Context, d *delivery, c store.Claim) error {
	w.mu.Lock()
	if ks := w.key(d.ms.key); !ks.firstEffect.IsZero() && time.Since(ks.firstEffect) >= w.t.TTL {
		// The record that the first effect made DONE may have expired
		// (its ttl counts from a completion after that effect): from then
		// on the store suppresses no duplicate, as documented.
		ks.excused, ks.expired = true, true
	}
	w.mu.Unlock()
	if w.b.Tx != nil {
		err := w.b.Tx.Commit(ctx, c)
		if err != nil {
			w.tracef(d, "body's transaction fails: %v", err)
			w.noteFenced(d, err)
			return err
		}
		w.checkOrder(d)
		w.markWrote(d)
		w.tracef(d, "effect committed with the completion, fence %d", c.Fence)
		if d.a.LostCommit {
			// The COMMIT landed but its reply was lost: the caller's
			// retry loop, as docs/stores/sql.md encourages one, runs the
			// transaction again. Its CompleteTx must refuse a record its
			// own first commit made DONE, or the effect is booked twice.
			err := w.b.Tx.Commit(ctx, c)
			w.tracef(d, "COMMIT reply lost; the transaction, retried, answers %v", err)
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := w.led.write(d.ms.key, c); err != nil {
		w.tracef(d, "ledger refuses fence %d: %v", c.Fence, err)
		w.noteFenced(d, err)
		return err
	}
	w.checkZombieWrite(d, c)
	w.checkOrder(d)
	w.markWrote(d)
	w.tracef(d, "effect written, fence %d", c.Fence)
	return nil
}

func (w *world) markWrote(d *delivery) {
	w.mu.Lock()
	d.wrote = true
	if ks := w.key(d.ms.key); ks.firstEffect.IsZero() {
		ks.firstEffect = time.Now()
	}
	twice := w.wroteAfterRetry(d)
	w.mu.Unlock()
	if twice != "" {
		w.violate(d, ruleRetryOnce, twice)
	}
}

func (w *world) noteFenced(d *delivery, err error) {
	if errors.Is(err, store.ErrFenced) {
		w.mu.Lock()
		d.fenced = true
		w.mu.Unlock()
	}
}

// dead freezes a body whose process crashed: it never returns while the
// run goes on, and its answer is lost.
func (w *world) dead(d *delivery) error {
	w.freeze(d, "dies with its process")
	w.mu.Lock()
	d.struck = true
	w.mu.Unlock()
	d.leave.Do(w.live.Done)
	<-w.end
	return errGone
}
