package store

import (
	"errors"
	"fmt"
)

// MaxFingerprintLen is the longest payload fingerprint, in bytes, that
// stores keep: a SHA-256 sum.
const MaxFingerprintLen = 32

// ErrInvalidFingerprint is wrapped by the error of [CheckFingerprint].
var ErrInvalidFingerprint = errors.New("store: invalid fingerprint")

// CheckFingerprint reports whether fp can be stored: at most
// [MaxFingerprintLen] bytes. Stores return its error unchanged from Claim.
func CheckFingerprint(fp []byte) error {
	if len(fp) > MaxFingerprintLen {
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidFingerprint, len(fp), MaxFingerprintLen)
	}
	return nil
}
