package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store"
)

// ErrLeaseLost is the cause (see context.Cause) of the cancellation of a
// body's context when the gateway could not keep its claim: the key was
// taken over, or the store could not be reached to renew the lease before
// it ended. The body should stop: its completion will not be recorded,
// even if it returns nil (Lock then returns this cause).
var ErrLeaseLost = errors.New("gateway: lease lost")

// minRenewedLease is the shortest lease the gateway will renew: renewals
// happen every third of it and each must reach the store in time.
const minRenewedLease = 50 * time.Millisecond

// renew starts renewing c's lease for the body about to run, when the
// store can renew claims; otherwise it returns nil, a renewal whose
// methods do nothing but give the body its claim. claimedAt is when the
// Claim was sent: the lease counts from there on the local monotonic
// clock, which never runs ahead of the store.
//
// Renewal lasts until end: past the body, while its completion is
// recorded. The caller's context ending (a client gone, a push deadline,
// Receive shutting down) cancels the body's context but not the renewal,
// because the body may go on regardless (a call that takes no context),
// and a lapsed lease would let a redelivery run the same work beside it.
// Only a lost claim cancels the body from here, and a body handing its
// claim to a transaction (store.EnterTx) ends the renewal early.
func (g *Gateway) renew(ctx context.Context, c store.Claim, claimedAt time.Time, sc scope) *renewal {
	if g.ext == nil {
		return nil
	}
	bctx, cancel := context.WithCancelCause(ctx)
	r := &renewal{
		claimCtx: claimCtx{Context: bctx},
		g:        g, cancel: cancel, c: c, sc: sc,
		deadline: claimedAt.Add(g.opts.Lease),
	}
	r.claimCtx.claim = store.OnEnterTx(c, r)
	// The first renewal counts from the Claim's sending, as the lease
	// does, so that a slow Claim leaves the renewal its margin.
	due := claimedAt.Add(g.renewInterval(ctx))
	r.mu.Lock() // the timer may fire before it is stored
	r.timer = time.AfterFunc(time.Until(due), r.renew)
	r.mu.Unlock()
	return r
}

// bodyCtx is the context the body runs on, derived from ctx: it carries
// the claim, and can be cancelled by the renewal.
func (r *renewal) bodyCtx(ctx context.Context, c store.Claim) context.Context {
	if r == nil {
		return withClaim(ctx, c)
	}
	return &r.claimCtx
}

// lost returns the cause (matching ErrLeaseLost) with which the renewal
// cancelled the body's context, if it did: the body ran without its claim
// for a while, and returning nil must not get it recorded done.
func (r *renewal) lost() error {
	if r == nil {
		return nil
	}
	if err := context.Cause(&r.claimCtx); errors.Is(err, ErrLeaseLost) {
		return err
	}
	return nil
}

// settling marks the body returned: a claim lost from here on is told by
// Complete's answer, and the body is not cancelled for it.
func (r *renewal) settling() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.returned = true
	r.mu.Unlock()
}

// end stops the renewal and releases the body's context. It may be called
// more than once. An Extend in flight is cancelled rather than waited for
// to its own deadline, which may be most of a lease away: the body's
// answer must not wait on a slow store for a lease it no longer needs.
// end returns once that call has returned.
func (r *renewal) end() {
	if r == nil {
		return
	}
	r.halt()
	r.inflight.Wait()
	r.cancel(nil)
}

// EnteredTx ends the renewal without waiting: the body is completing its
// claim inside a transaction of its own (store.EnterTx), which from now on
// decides whether the work commits. A renewal would queue behind that
// transaction's lock on the record, or abort it, and the lease no longer
// guards anything a takeover could break: see store.EnterTx.
func (r *renewal) EnteredTx() { r.halt() }

// halt ends r's renewals, as end does, but does not wait for an Extend in
// flight.
func (r *renewal) halt() {
	r.mu.Lock()
	r.stopped = true
	r.timer.Stop()
	if r.abort != nil {
		r.abort()
	}
	r.mu.Unlock()
}

// renewInterval is a third of the lease, moved by Options.RenewJitter so
// that many holders do not renew in step.
func (g *Gateway) renewInterval(ctx context.Context) time.Duration {
	l := g.opts.Lease
	if g.opts.RenewJitter != nil {
		return l/3 + g.opts.RenewJitter(ctx, l)
	}
	return l/3 + time.Duration(rand.Int64N(int64(l/15)+1)) - l/30
}

// renewal is one live claim under renewal, with its own timer; each
// renewal's Extend runs on the timer's goroutine, so a slow store delays
// only its claim. It is also the body's context, so that a claim costs
// one allocation beside its cancellable context and its timer.
type renewal struct {
	claimCtx // the body's context; never changes
	g        *Gateway
	sc       scope // where a lost claim is logged
	cancel   context.CancelCauseFunc
	inflight sync.WaitGroup // a renew call in progress

	mu       sync.Mutex  // guards the fields below
	timer    *time.Timer // runs renew when the next renewal is due
	c        store.Claim
	deadline time.Time          // when the lease ends, on the local clock
	abort    context.CancelFunc // cancels the Extend in flight, if any
	stopped  bool
	returned bool // the body returned: see settling
}

// renew runs on r's timer: it extends r's lease and sets the timer for the
// next renewal, or cancels the body when the claim is lost or about to
// lapse unrenewed.
func (r *renewal) renew() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.inflight.Add(1) // before end's Wait, which follows stopped
	defer r.inflight.Done()
	c, deadline, lease := r.c, r.deadline, r.g.opts.Lease
	// Give up early enough to cancel the body before the lease ends. The
	// caller's cancellation does not reach Extend: see run. A renewal that
	// comes late (after a Claim that took most of the lease) still gets a
	// real attempt, of a tenth of the lease: the store may well answer, and
	// an Extend failed unsent would cancel a body that has just begun.
	giveUp := deadline.Add(-lease / 6)
	try := giveUp
	if late := time.Now().Add(lease / 10); try.Before(late) {
		try = late
	}
	ectx, ecancel := context.WithDeadline(context.WithoutCancel(&r.claimCtx), try)
	r.abort = ecancel
	r.mu.Unlock()

	sent := time.Now()
	nc, err := r.g.ext.Extend(ectx, c, lease)
	r.g.tel.timed(&r.claimCtx, opExtend, sent)
	completed := errors.Is(err, store.ErrFenced) && r.g.doneUnder(ectx, c)
	ecancel()

	r.mu.Lock()
	r.abort = nil
	if r.stopped {
		r.mu.Unlock()
		return
	}
	now := time.Now()
	var (
		lost error
		next time.Duration
	)
	switch {
	case completed:
		// The body recorded the key done itself, in its own transaction
		// (a store's CompleteTx): nothing is left to renew, nothing lost.
		r.mu.Unlock()
		return
	case err == nil:
		r.c, r.deadline = nc, sent.Add(lease)
		next = r.g.renewInterval(&r.claimCtx)
	case errors.Is(err, store.ErrFenced):
		lost = fmt.Errorf("%w: the key was taken over or released", ErrLeaseLost)
	default:
		// Retry sooner as the end nears, but not in ever smaller steps:
		// below a fiftieth of the lease there is no time left to retry.
		next = min(lease/10, giveUp.Sub(now)/2)
		if next < lease/50 {
			lost = fmt.Errorf("%w: could not renew before the lease ended", ErrLeaseLost)
		}
	}
	if lost == nil {
		r.timer.Reset(next)
	}
	returned := r.returned
	r.mu.Unlock()

	// Log and cancel outside the lock; end waits for this call, so the
	// body still runs.
	switch {
	case lost != nil && returned:
		// Complete's answer tells the rest.
		r.sc.logAttrs(&r.claimCtx, slog.LevelWarn, "idemgate: claim lost while its completion was being recorded",
			r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), r.g.errorAttr(c.Key, err))
	case lost != nil:
		r.sc.logAttrs(&r.claimCtx, slog.LevelError, "idemgate: claim lost while the work ran; cancelling it",
			r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), r.g.errorAttr(c.Key, err))
		r.cancel(lost)
	case err != nil:
		r.sc.logAttrs(&r.claimCtx, slog.LevelWarn, "idemgate: lease renewal failed; retrying",
			r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), r.g.errorAttr(c.Key, err))
	}
}

// doneUnder reports whether c's record is DONE under c's own fence, when
// the store can tell (it has store.Inspector's Inspect): an Extend that found no CLAIMED
// record then met the body's own completion, not a takeover.
func (g *Gateway) doneUnder(ctx context.Context, c store.Claim) bool {
	in, ok := g.st.(reader)
	if !ok {
		return false
	}
	rec, ok, err := in.Inspect(ctx, c.Key)
	return err == nil && ok && rec.State == store.Done && rec.Fence == c.Fence
}
