package gateway

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

// claimCtx carries the claim to the body. One allocation carries both the
// parent and the value, where context.WithValue would need two.
type claimCtx struct {
	context.Context
	claim store.Claim
}

type claimKey struct{}

func (c *claimCtx) Value(key any) any {
	if key == (claimKey{}) {
		return &c.claim
	}
	return c.Context.Value(key)
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
