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
func (g *Gateway) run(ctx context.Context, c store.Claim, claimedAt time.Time, fn func(context.Context) error) error {
	if g.ext == nil {
		return fn(withClaim(ctx, c))
	}
	bctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &renewal{g: g, ctx: bctx, cancel: cancel, c: c, deadline: claimedAt.Add(g.opts.Lease)}
	r.mu.Lock()
	r.t = time.AfterFunc(r.interval(), r.renew)
	r.mu.Unlock()
	defer r.stop()
	return fn(withClaim(bctx, c))
}

// renewal keeps one claim alive with timer callbacks, so that bodies shorter
// than a third of the lease never start a goroutine.
type renewal struct {
	g        *Gateway
	ctx      context.Context // the body's context: renewal ends with it
	cancel   context.CancelCauseFunc
	inflight sync.WaitGroup // a renew call in progress

	mu       sync.Mutex // guards the fields below
	t        *time.Timer
	c        store.Claim
	deadline time.Time // when the lease ends, on the local clock
	stopped  bool
}

// interval is a third of the lease, jittered by ±10% so that many holders
// do not renew in step.
func (r *renewal) interval() time.Duration {
	l := r.g.opts.Lease
	return l/3 + time.Duration(rand.Int64N(int64(l/15)+1)) - l/30
}

// stop ends the renewals and waits for one in flight.
func (r *renewal) stop() {
	r.mu.Lock()
	r.stopped = true
	r.t.Stop()
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
	c, deadline := r.c, r.deadline
	r.mu.Unlock()
	defer r.inflight.Done()

	if r.ctx.Err() != nil {
		return // the body was cancelled by its caller: stop renewing and let the lease run out
	}
	lease := r.g.opts.Lease
	// Give up early enough to cancel the body before the lease ends.
	giveUp := deadline.Add(-lease / 6)
	sent := time.Now()
	ectx, ecancel := context.WithDeadline(context.WithoutCancel(r.ctx), giveUp)
	nc, err := r.g.ext.Extend(ectx, c, lease)
	r.g.tel.timed(r.ctx, opExtend, sent)
	ecancel()

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	switch {
	case err == nil:
		r.c, r.deadline = nc, sent.Add(lease)
		r.t.Reset(r.interval())
	case errors.Is(err, store.ErrFenced):
		r.lost(c, fmt.Errorf("%w: the key was taken over or released", ErrLeaseLost), err)
	case !time.Now().Before(giveUp):
		r.lost(c, fmt.Errorf("%w: could not renew before the lease ended", ErrLeaseLost), err)
	default:
		r.g.log.LogAttrs(r.ctx, slog.LevelWarn, "idemgate: lease renewal failed; retrying",
			r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), slog.Any("error", err))
		r.t.Reset(min(lease/10, time.Until(giveUp)/2))
	}
}

// lost cancels the body. Called with r.mu held.
func (r *renewal) lost(c store.Claim, cause, err error) {
	r.g.log.LogAttrs(r.ctx, slog.LevelError, "idemgate: claim lost while the work ran; cancelling it",
		r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), slog.Any("error", err))
	r.cancel(cause)
}
