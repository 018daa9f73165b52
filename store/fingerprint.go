package store

import (
	"context"
	"errors"
	"fmt"
)

// MaxFingerprintLen is the longest payload fingerprint, in bytes, that
// stores keep: a SHA-256 sum.
const MaxFingerprintLen = 32

// ErrInvalidFingerprint is wrapped by the error of [CheckFingerprint].
var ErrInvalidFingerprint = errors.New("store: invalid fingerprint")

type fingerprintKey struct{}

// WithFingerprint returns a context that makes Claim keep fp, a fingerprint
// of the delivery's payload, on the record it wins, so that a later Claim of
// the key can tell a redelivery of the same payload from a different payload
// that reuses the key. A nil or empty fp keeps none.
func WithFingerprint(ctx context.Context, fp []byte) context.Context {
	return context.WithValue(ctx, fingerprintKey{}, fp)
}

// Fingerprint returns the fingerprint set by [WithFingerprint], or nil.
// Stores call it once per Claim call.
func Fingerprint(ctx context.Context) []byte {
	fp, _ := ctx.Value(fingerprintKey{}).([]byte)
	if len(fp) == 0 {
		return nil
	}
	return fp
}

// CheckFingerprint reports whether fp can be stored: at most
// [MaxFingerprintLen] bytes. Stores return its error unchanged from Claim.
func CheckFingerprint(fp []byte) error {
	if len(fp) > MaxFingerprintLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidFingerprint, len(fp), MaxFingerprintLen)
	}
	return nil
}
