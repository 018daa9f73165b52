package store

import (
	"errors"
	"fmt"
	"time"
)

// ErrLeaseTooLong is wrapped by the error of a Claim whose lease is not
// shorter than the store's ttl: such a store could forget finished work, or
// delete a stalled holder's record, sooner than one lease can lapse. Every
// store in this module refuses it before any I/O (docs/design.md, "Why
// fences never repeat").
var ErrLeaseTooLong = errors.New("store: lease is not shorter than the store's ttl")

// CheckLease returns an error wrapping ErrLeaseTooLong when lease ≥ ttl.
// Stores call it at the start of Claim.
func CheckLease(lease, ttl time.Duration) error {
	if lease >= ttl {
		return fmt.Errorf("%w: lease %v, ttl %v", ErrLeaseTooLong, lease, ttl)
	}
	return nil
}

// FenceAt is the fence a record gets when a write raises it at now, on the
// store's clock in microseconds since 1970: above old (0 for none), and
// never below now, so that a record made anew starts above every fence of
// a deleted predecessor (docs/design.md, "Why fences never repeat"). Stores
// that decide on the server compute the same in their statements or scripts.
func FenceAt(old, nowMicros int64) int64 {
	return max(old+1, nowMicros)
}
