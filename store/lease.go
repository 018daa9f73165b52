package store

import (
	"errors"
	"fmt"
	"time"
)

// ErrLeaseTooLong is wrapped by the error of a Claim whose lease is not
// shorter than the store's ttl, the time a completed record suppresses
// duplicates. Such a store forgets finished work sooner than one lease can
// lapse: a copy of the message that met the holder's lease and waits for
// its redelivery would find no record and run the work again, and a holder
// stalled for little more than one lease would meet a record deleted and
// made anew. Every store in this module refuses it before any I/O: keep
// lease < ttl.
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
// store's clock in microseconds since 1970: above old, the fence it had
// (0 for none), and never below now. A record created after the deletion of
// an older one therefore starts above every fence the older one handed out,
// as long as the clock has not stepped back by more than the time between
// that record's last fence raise and its deletion (at least the store's
// ttl) and no key sees more than one raise per microsecond for a long
// stretch. Stores that decide on the server compute the same in their own
// statements or scripts.
func FenceAt(old, nowMicros int64) int64 {
	return max(old+1, nowMicros)
}
