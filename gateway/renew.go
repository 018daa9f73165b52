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
// it ended. The body should stop: its completion will not be recorded.
var ErrLeaseLost = errors.New("gateway: lease lost")

// minRenewedLease is the shortest lease the gateway will renew: renewals
// happen every third of it and each must reach the store in time.
const minRenewedLease = 50 * time.Millisecond

// run calls fn under claim c, renewing the lease while fn runs when the
// store can. claimedAt is when the Claim was sent: the lease counts from
// there on the local monotonic clock, which never runs ahead of the store.
//
// Renewal lasts exactly as long as fn: the caller's context ending (a
// client gone, a push deadline, Receive shutting down) cancels fn's
// context but not the renewal, because fn may go on regardless (a call
// that takes no context), and a lapsed lease would let a redelivery run the
// same work beside it. Only a lost claim cancels fn from here.
func (g *Gateway) run(ctx context.Context, c store.Claim, claimedAt time.Time, fn func(context.Context) error) error {
	if g.ext == nil {
		return fn(withClaim(ctx, c))
	}
	bctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &renewal{g: g, ctx: bctx, cancel: cancel, c: c, deadline: claimedAt.Add(g.opts.Lease)}
	r.mu.Lock()
	// The first renewal counts from the Claim's sending, as the lease does,
	// so that a slow Claim leaves the renewal its full margin.
	r.t = time.AfterFunc(r.interval()-time.Since(claimedAt), r.renew)
	r.mu.Unlock()
	defer r.stop()
	return fn(withClaim(bctx, c))
}

// renewal keeps one claim alive with timer callbacks, so that bodies shorter
// than a third of the lease never start a goroutine.
type renewal struct {
	g        *Gateway
	ctx      context.Context // the body's context, for its values and to log with
	cancel   context.CancelCauseFunc
	inflight sync.WaitGroup // a renew call in progress

	mu       sync.Mutex // guards the fields below
	t        *time.Timer
	c        store.Claim
	deadline time.Time          // when the lease ends, on the local clock
	abort    context.CancelFunc // cancels the Extend in flight, if any
	stopped  bool
}

// interval is a third of the lease, jittered by ±10% so that many holders
// do not renew in step.
func (r *renewal) interval() time.Duration {
	l := r.g.opts.Lease
	return l/3 + time.Duration(rand.Int64N(int64(l/15)+1)) - l/30
}

// stop ends the renewals. An Extend in flight is cancelled rather than
// waited for to its own deadline, which may be most of a lease away: the
// body's answer must not wait on a slow store for a lease it no longer
// needs. stop returns once that call has returned.
func (r *renewal) stop() {
	r.mu.Lock()
	r.stopped = true
	r.t.Stop()
	if r.abort != nil {
		r.abort()
	}
	r.mu.Unlock()
	r.inflight.Wait()
}

// renew runs on the timer: it extends the lease, and reschedules itself, or
// cancels the body when the claim is lost or about to lapse unrenewed.
func (r *renewal) renew() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.inflight.Add(1)
	defer r.inflight.Done()
	c, deadline, lease := r.c, r.deadline, r.g.opts.Lease
	// Give up early enough to cancel the body before the lease ends. The
	// caller's cancellation does not reach Extend: see run.
	giveUp := deadline.Add(-lease / 6)
	ectx, ecancel := context.WithDeadline(context.WithoutCancel(r.ctx), giveUp)
	r.abort = ecancel
	r.mu.Unlock()

	sent := time.Now()
	nc, err := r.g.ext.Extend(ectx, c, lease)
	r.g.tel.timed(r.ctx, opExtend, sent)
	ecancel()

	r.mu.Lock()
	defer r.mu.Unlock()
	r.abort = nil
	if r.stopped {
		return
	}
	switch {
	case err == nil:
		r.c, r.deadline = nc, sent.Add(lease)
		r.t.Reset(r.interval())
	case errors.Is(err, store.ErrFenced):
		r.lost(c, fmt.Errorf("%w: the key was taken over or released", ErrLeaseLost), err)
	default:
		// Retry sooner as the end nears, but not in ever smaller steps:
		// below a fiftieth of the lease there is no time left to retry.
		retry := min(lease/10, time.Until(giveUp)/2)
		if retry < lease/50 {
			r.lost(c, fmt.Errorf("%w: could not renew before the lease ended", ErrLeaseLost), err)
			return
		}
		r.g.log.LogAttrs(r.ctx, slog.LevelWarn, "idemgate: lease renewal failed; retrying",
			r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), slog.Any("error", err))
		r.t.Reset(retry)
	}
}

// lost cancels the body. Called with r.mu held.
func (r *renewal) lost(c store.Claim, cause, err error) {
	r.g.log.LogAttrs(r.ctx, slog.LevelError, "idemgate: claim lost while the work ran; cancelling it",
		r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), slog.Any("error", err))
	r.cancel(cause)
}
