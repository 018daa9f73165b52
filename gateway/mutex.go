package gateway

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

// Mutex runs fn while holding key, so that no two callers run for one key
// at the same time, anywhere the store is shared. Unlike Lock it never
// marks the key done: after fn returns the key is released and the next
// caller runs too. Mutex serializes; it does not de-duplicate, and it does
// not order.
//
// A live holder, or a key completed by Lock, gives an *InProgressError;
// a store failure gives an error wrapping ErrStore. Otherwise Mutex returns
// fn's error, or, when fn returns nil after its context was cancelled for
// a lost lease, that cause (ErrLeaseLost): fn did not hold the key all
// along. If the release fails after fn succeeded, Mutex logs it and
// returns nil: the key frees when its lease ends.
func (g *Gateway) Mutex(ctx context.Context, key string, fn func(ctx context.Context) error) (err error) {
	if g.disabled {
		return g.passThrough(ctx, "mutex", key, fn)
	}
	ctx, span := g.startSpan(ctx, "idemgate.Mutex", key)
	outcome, fence := OutcomeFailed, int64(0) // a panic leaves these
	defer func() { g.endSpan(ctx, span, key, outcome, fence, err) }()

	sc := scope{log: g.log}
	c, claimedAt, err := g.claim(ctx, key, sc)
	if err != nil {
		outcome = claimOutcome(err)
		return g.hideKey(key, err)
	}
	fence = c.Fence
	if c.Status != store.Won {
		outcome = OutcomeInProgress
		return g.hideKey(key, &InProgressError{Key: key, LeaseUntil: c.LeaseUntil})
	}
	defer g.release(ctx, c, "mutex", sc)
	r := g.renew(ctx, c, claimedAt, sc)
	defer r.end() // before the release
	if err = fn(r.bodyCtx(ctx, c)); err == nil {
		err = r.lost()
	}
	if err == nil {
		outcome = OutcomeWon
	}
	return err
}
