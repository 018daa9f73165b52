package gateway

import (
	"errors"
	"fmt"
	"time"
)

// ErrDuplicate is returned by Lock when the key's work is already done and
// its record has not expired. The delivery should be acknowledged.
var ErrDuplicate = errors.New("gateway: duplicate: the work for this key is already done")

// ErrInProgress is matched (with errors.Is) by the *InProgressError that
// Lock and Mutex return when a live holder owns the key, or, for Mutex,
// when Lock completed it. The delivery should be retried later.
var ErrInProgress = errors.New("gateway: in progress: another delivery holds this key")

// ErrStore wraps every error the store returned on Claim. The work did not
// run; the delivery should be retried.
var ErrStore = errors.New("gateway: store failed")

// ErrNoKey wraps the error returned when no usable idempotency key could be
// resolved. The gateway refuses to run the work unguarded.
var ErrNoKey = errors.New("gateway: no idempotency key")

// InProgressError reports that a live holder owns Key until LeaseUntil.
// errors.Is(err, ErrInProgress) is true for it.
type InProgressError struct {
	Key string
	// LeaseUntil is when the holder's lease ends, as reported by the store;
	// zero when Done.
	LeaseUntil time.Time
	// Done says that a Mutex met a key completed by Lock: no holder will
	// let it go before its record expires.
	Done bool
	// HeldBy names the delivery that holds the key (or, when Done, did its
	// work), as its record keeps it (WithOrigin): "push/4711", say;
	// empty when the record keeps none.
	HeldBy string
}

func (e *InProgressError) Error() string {
	switch {
	case e.Done:
		return fmt.Sprintf("gateway: in progress: key %q was completed by Lock; Mutex does not run over finished work", e.Key)
	case e.LeaseUntil.IsZero():
		return fmt.Sprintf("gateway: in progress: key %q is held", e.Key)
	}
	return fmt.Sprintf("gateway: in progress: key %q is held until %s", e.Key, e.LeaseUntil.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrInProgress) true.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }
