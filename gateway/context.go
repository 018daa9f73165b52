package gateway

import (
	"context"
	"sync/atomic"

	"github.com/idemgate/idemgate/store"
)

// claimCtx carries the claim to the body. One allocation carries both the
// parent and the value, where context.WithValue would need two.
type claimCtx struct {
	context.Context
	claim store.Claim
	// contended says that a Lock or Mutex called with this context met
	// another caller's hold on a key.
	contended atomic.Bool
}

type (
	claimKey struct{}
	bodyKey  struct{}
)

func (c *claimCtx) Value(key any) any {
	switch key {
	case claimKey{}:
		return &c.claim
	case bodyKey{}:
		return c
	}
	return c.Context.Value(key)
}

// markContended notes, on the guarded body whose context ctx is (if any),
// that one of its Locks or Mutexes met a live holder: the body's failure
// is then contention, which a handler may have answered with any status.
func markContended(ctx context.Context) {
	if b, ok := ctx.Value(bodyKey{}).(*claimCtx); ok {
		b.contended.Store(true)
	}
}

// contended reports whether markContended marked the body of ctx.
func contended(ctx context.Context) bool {
	b, ok := ctx.Value(bodyKey{}).(*claimCtx)
	return ok && b.contended.Load()
}

func withClaim(ctx context.Context, c store.Claim) context.Context {
	return &claimCtx{Context: ctx, claim: c}
}

// ClaimFromContext returns the claim under which the body of Lock or Mutex
// runs: its Key, and its Fence to hand to a sink that refuses writes from
// older fences. ok is false outside a guarded body.
func ClaimFromContext(ctx context.Context) (c store.Claim, ok bool) {
	p, ok := ctx.Value(claimKey{}).(*store.Claim)
	if !ok {
		return store.Claim{}, false
	}
	return *p, true
}
