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
// fn's error. If the release fails after fn succeeded, Mutex logs it and
// returns nil: the key frees when its lease ends.
func (g *Gateway) Mutex(ctx context.Context, key string, fn func(ctx context.Context) error) (err error) {
	if g.disabled {
		return g.passThrough(ctx, "mutex", key, fn)
	}
	ctx, span := g.startSpan(ctx, "idemgate.Mutex", key)
	outcome, fence := OutcomeFailed, int64(0) // a panic leaves these
	defer func() { g.endSpan(ctx, span, outcome, fence, err) }()

	c, claimedAt, err := g.claim(ctx, key)
	if err != nil {
		outcome = claimOutcome(err)
		return err
	}
	fence = c.Fence
	if c.Status != store.Won {
		outcome = OutcomeInProgress
		return &InProgressError{Key: key, LeaseUntil: c.LeaseUntil}
	}
	sc := scope{log: g.log}
	defer g.release(ctx, c, "mutex", sc)
	if err = g.run(ctx, c, claimedAt, fn, sc); err == nil {
		outcome = OutcomeWon
	}
	return err
}
