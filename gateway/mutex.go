package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Mutex runs fn while holding key, so that no two callers run for one key
// at the same time, anywhere the store is shared. Unlike Lock it never
// marks the key done: the key is released after fn, and the next caller
// runs too. It serializes; it neither de-duplicates nor orders, and it
// does not wait: a live holder, or a key completed by Lock, gives an
// *InProgressError at once.
//
// Mutex returns fn's error; ErrLeaseLost when fn returned nil after its
// claim was lost; an error wrapping ErrStore when the store fails. A
// failed release after fn succeeded is logged, not returned: the key frees
// when its lease ends. Without renewal, fn may outlive its lease and the
// next caller then runs beside it (logged at ERROR): choose the lease
// longer than fn can take.
func (g *Gateway) Mutex(ctx context.Context, key string, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		panic("gateway: Mutex with a nil function")
	}
	if g.disabled {
		return g.passThrough(ctx, "mutex", key, fn)
	}
	ctx, span := g.startSpan(ctx, "idemgate.Mutex", key)
	outcome, fence := OutcomeFailed, int64(0) // a panic leaves these
	defer func() { g.endSpan(ctx, span, key, outcome, fence, err) }()

	sc := scope{log: g.log}
	c, claimedAt, err := g.claim(ctx, key, sc)
	if err != nil {
		outcome = claimOutcome(ctx, err)
		return g.hideKey(key, err)
	}
	fence = c.Fence
	if c.Status != store.Won {
		outcome = OutcomeInProgress
		markContended(ctx)
		return g.hideKey(key, &InProgressError{Key: key, LeaseUntil: c.LeaseUntil, Done: c.Status == store.AlreadyDone || c.Status == store.AlreadyFailed, HeldBy: c.Origin})
	}
	defer g.release(ctx, c, "mutex", sc)
	r := g.renew(ctx, c, claimedAt, sc)
	defer r.end() // before the release
	body := r.bodyCtx(ctx, c)
	if err = fn(body); err == nil {
		err = r.lost()
	} else if contended(body) {
		markContended(ctx) // the contention of fn's own Mutex or Lock
	}
	switch {
	case err != nil:
	case r == nil && time.Since(claimedAt) >= g.opts.Lease:
		// Without renewal nothing stopped fn when its lease lapsed: the
		// next caller may have run beside it. fn's work is done, and a
		// retry would repeat it, so the caller is not failed; but the
		// promise was broken, and that is reported.
		outcome = OutcomeFencedOut
		sc.logAttrs(ctx, slog.LevelError, "idemgate: mutex body ran past its lease (lease too short?); another caller may have run beside it",
			g.keyAttr(key), slog.Int64("fence", c.Fence), outcome.attr(), millis("lease", g.opts.Lease), millis("held", time.Since(claimedAt)))
	default:
		outcome = OutcomeWon
	}
	return err
}
