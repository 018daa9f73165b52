package store

import (
	"context"
	"time"
)

// Inspector is implemented by stores that let an operator read one record
// and force it free. Every store in this module implements it; cmd/idemgate
// is built on it.
type Inspector interface {
	// Inspect reads key's record in one atomic step and changes nothing.
	// ok is false when there is no live record: the key is absent, or its
	// record is past expiresAt, which every operation treats as absent.
	// An invalid key is an error wrapping ErrInvalidKey.
	Inspect(ctx context.Context, key string) (r Record, ok bool, err error)

	// Forget forces key's record free, whatever its state, and reports
	// whether there was a live record to free. It is a Release that does
	// not ask for the holder's fence: in one atomic step the record becomes
	// a CLAIMED record whose lease ends now, with no token and no
	// fingerprint, and its fence rises. The next Claim therefore wins at once with a higher fence, a
	// holder still at work is fenced out (its Complete returns false, its
	// Extend fails with ErrFenced), and a DONE record stops suppressing
	// duplicates.
	//
	// Forget is an operator's action that breaks the guarantee for that
	// key on purpose: the next delivery of the message runs the work again.
	// It never deletes the record, because a deleted record would let the
	// next Claim start again at fence 1, which a zombie holding an old
	// fence 1 could then complete.
	Forget(ctx context.Context, key string) (ok bool, err error)
}

// RecordState is the state a record is stored in.
type RecordState uint8

// The stored states. A released or forgotten claim stays Claimed, with an
// empty token and a lease that has ended (see [Record.Released]). The zero
// RecordState is invalid.
const (
	Claimed RecordState = iota + 1 // somebody claimed the key and has not completed it
	Done                           // the work succeeded: duplicates are suppressed until ExpiresAt
	Failed                         // the work failed for good (see Failer): it does not run again until ExpiresAt or a Retry
)

// String returns "CLAIMED", "DONE" or "FAILED", the names the store
// documentation uses.
func (s RecordState) String() string {
	switch s {
	case Claimed:
		return "CLAIMED"
	case Done:
		return "DONE"
	case Failed:
		return "FAILED"
	}
	return "INVALID"
}

// Record is one stored record as [Inspector.Inspect] reads it. Instants are
// on the clock the store decides with: the server's for Redis and SQL, the
// process's for memory, Datastore and Firestore.
type Record struct {
	Key   string
	State RecordState
	// Fence is the record's fencing token: the one a live holder carries,
	// or one above it once the claim was released or forgotten.
	Fence int64
	// Token identifies the Claim call that holds a Claimed record. It is
	// empty once the claim was released or forgotten, and always empty for
	// a Done record (not every store keeps it there).
	Token string
	// LeaseUntil is when the last lease ends or ended. For a released or
	// forgotten claim it is the instant of the release; for a Done record,
	// the instant of the completion (CompletedAt).
	LeaseUntil time.Time
	// ExpiresAt is when the record stops counting: after it, the next Claim
	// wins (with a higher fence) and the store may delete the record.
	ExpiresAt time.Time
	// Fingerprint is the payload fingerprint the record keeps (see
	// ClaimOptions); nil when none.
	Fingerprint []byte
	// Origin names the delivery whose Claim won the record (see
	// ClaimOptions): for a Claimed record the holder's, for a Done one the
	// delivery that did the work. A released or forgotten record keeps the
	// origin of its last holder (or of the work it held, once Done), so an
	// operator sees who had it last; the next winning Claim replaces it.
	// Empty when none was kept.
	Origin string
	// CompletedAt is when a Done record was completed, on the store's
	// clock; zero for a Claimed one. Complete ends the lease there: it is
	// the LeaseUntil a Done record keeps, so it costs no field of its own.
	// A record completed by an earlier idemgate, whose Complete left
	// LeaseUntil alone, shows its last lease end instead until it expires.
	CompletedAt time.Time
	// Attempts is how many attempts at the work failed (see Failer),
	// counted since the record was made, retried or forgotten. A Claimed
	// record keeps its count across Release and takeovers, and a Done one
	// keeps the count it had.
	Attempts int
	// Reason is why the last failed attempt failed; empty when none did.
	Reason string
	// FirstFailure is when the first counted attempt failed, on the
	// store's clock; zero when none did. For a Failed record, LeaseUntil
	// is when the last one failed (FailedAt).
	FirstFailure time.Time
	// ReadAt is the store's clock when the record was read, to compare the
	// other instants with.
	ReadAt time.Time
}

// FailedAt is when a Failed record went FAILED, on the store's clock (its
// lease ended there, as a Done record's ends at its completion); zero for
// a record in another state.
func (r Record) FailedAt() time.Time {
	if r.State != Failed {
		return time.Time{}
	}
	return r.LeaseUntil
}

// Released reports whether r is a claim that was given up, by Release or
// Forget: nobody holds it, and the next Claim wins at once.
func (r Record) Released() bool { return r.State == Claimed && r.Token == "" }

// Lapsed reports whether r is a claim whose holder's lease had ended when r
// was read, without a release: the holder may have crashed, or may still be
// working past its lease (a zombie). The next Claim takes the key over.
func (r Record) Lapsed() bool {
	return r.State == Claimed && r.Token != "" && !r.ReadAt.Before(r.LeaseUntil)
}
