package gateway

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

type (
	fingerprintKey struct{}
	originKey      struct{}
)

// WithFingerprint returns a context that makes Lock and Mutex claim their
// key with fp, a fingerprint of the payload (at most
// store.MaxFingerprintLen bytes): a record that keeps another is the key
// reused for another payload (see Lock). A nil or empty fp compares
// nothing. The context of Lock's body carries none.
func WithFingerprint(ctx context.Context, fp []byte) context.Context {
	return context.WithValue(ctx, fingerprintKey{}, fp)
}

// WithOrigin returns a context that makes Lock and Mutex name origin on the
// record they win (see store.ClaimOptions): the delivery that runs the
// work, such as "push/4711". The gateway's deliveries set their own unless
// ctx names one; the body's context keeps it, for the body's own Locks.
func WithOrigin(ctx context.Context, origin string) context.Context {
	return context.WithValue(ctx, originKey{}, origin)
}

// fingerprintOf returns the fingerprint set by WithFingerprint, or nil.
func fingerprintOf(ctx context.Context) []byte {
	fp, _ := ctx.Value(fingerprintKey{}).([]byte)
	if len(fp) == 0 {
		return nil
	}
	return fp
}

// originOfCtx returns the origin set by WithOrigin, or "".
func originOfCtx(ctx context.Context) string {
	o, _ := ctx.Value(originKey{}).(string)
	return o
}

// claimOptions are the inputs of the Claim that ctx's Lock or Mutex makes.
func claimOptions(ctx context.Context) store.ClaimOptions {
	return store.ClaimOptions{Fingerprint: fingerprintOf(ctx), Origin: originOfCtx(ctx)}
}
