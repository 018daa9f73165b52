package store

import (
	"context"
	"errors"
	"time"
)

// Store keeps idempotency records. Implementations are safe for concurrent
// use by many goroutines and processes; each method is atomic on its key.
type Store interface {
	// Claim tries to take key for lease. The result's Status says what
	// happened: Won (the caller owns the key until LeaseUntil and holds the
	// returned Fence), AlreadyDone (the work was completed and the record has
	// not expired), HeldByOther (a live holder owns the key until
	// LeaseUntil). An error means nothing is known about the record; the
	// caller must not run the work. A lease that is not shorter than the
	// store's ttl is refused with an error wrapping ErrLeaseTooLong; opts
	// that [ClaimOptions.Checked] refuses, with its error. A Won record
	// keeps opts' Fingerprint and Origin; the claim carries
	// [ClaimOptions.ClaimToken].
	Claim(ctx context.Context, key string, lease time.Duration, opts ClaimOptions) (Claim, error)

	// Complete marks c's record DONE when c still owns it (the record is
	// CLAIMED with c.Fence and c.Token), whether or not the lease has
	// lapsed, and reports whether it did (true also when the record is
	// already DONE with c.Fence: a fence names one winning Claim, since a
	// key's fences never repeat). false means c was fenced out: somebody
	// reclaimed the key, c was released, or its record is gone. A claim
	// that was not won is refused with an error wrapping ErrNotWon.
	Complete(ctx context.Context, c Claim) (bool, error)

	// Release gives c's key up when c still owns its CLAIMED record (fence
	// and token): the key becomes claimable at once and the fence rises, so
	// c can never complete. A stale or unknown claim is ignored without
	// error; a claim that was not won is refused with an error wrapping
	// ErrNotWon.
	Release(ctx context.Context, c Claim) error
}

// Extender is implemented by stores that can prolong a live claim.
type Extender interface {
	// Extend sets c's lease to end lease from now and returns the updated
	// claim (same fence and token). It fails with ErrFenced when c no longer
	// owns a CLAIMED record (its fence and token): the key was reclaimed,
	// released or completed, or the record is gone. A claim that was not
	// won is refused with an error wrapping ErrNotWon.
	Extend(ctx context.Context, c Claim, lease time.Duration) (Claim, error)
}

// Status is the outcome of a Claim.
type Status uint8

// The outcomes of Claim. The zero Status is invalid, so a forgotten
// assignment is never mistaken for a win.
const (
	Won           Status = iota + 1 // the caller owns the key
	AlreadyDone                     // the work was done; the record has not expired
	HeldByOther                     // a live holder owns the key
	AlreadyFailed                   // the work failed for good (see Failer); the record has not expired
)

// String returns the status name: "won", "already_done", "held_by_other"
// or "already_failed".
func (s Status) String() string {
	switch s {
	case Won:
		return "won"
	case AlreadyDone:
		return "already_done"
	case HeldByOther:
		return "held_by_other"
	case AlreadyFailed:
		return "already_failed"
	}
	return "invalid"
}

// Claim is the result of [Store.Claim] and the proof of ownership passed back
// to Complete, Release and Extend.
type Claim struct {
	Key    string
	Status Status
	// Fence is the record's fencing token. For Won it is the caller's proof
	// of ownership, with Token; pass it to the sink to refuse writes from
	// older holders. A key's fences only rise and never repeat, even across
	// the deletion of its record (an expiry, a purge, a TTL policy): a new
	// record's fence is the store's clock in microseconds (see FenceAt).
	Fence int64
	// Token identifies the Claim call that won the record (empty unless Won).
	Token string
	// LeaseUntil is when the lease ends: the caller's for Won, the holder's
	// for HeldByOther. Zero for AlreadyDone and AlreadyFailed.
	LeaseUntil time.Time
	// Fingerprint is the payload fingerprint the record keeps (see
	// ClaimOptions): the caller's for Won, the winner's for AlreadyDone
	// and HeldByOther; nil when none was kept.
	Fingerprint []byte
	// Origin names the delivery that won the record (see ClaimOptions): the
	// caller's for Won, the winner's for AlreadyDone (the delivery that did
	// the work) and HeldByOther (the one at work); empty when none was kept.
	Origin string
	// Attempts is how many attempts failed (see Failer): the record's
	// count for AlreadyFailed; 0 otherwise.
	Attempts int
	// Reason is why the work failed, for AlreadyFailed; empty otherwise.
	Reason string

	// watcher is told by EnterTx; see OnEnterTx.
	watcher TxWatcher
}

// ErrFenced is returned (or wrapped) by [Extender.Extend] and by the
// stores' CompleteTx when the claim no longer owns its record, and by
// CompleteTx also when the record is DONE already under the claim's fence,
// so that the work does not commit twice. A body that returns it wrote
// nothing; the gateway acks the delivery when the key is DONE, and retries
// it otherwise.
var ErrFenced = errors.New("store: claim fenced out")
