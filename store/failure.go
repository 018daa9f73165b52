package store

import (
	"context"
	"errors"
)

// Failer is implemented by stores that keep failures: a key whose work
// failed for good is recorded FAILED, so that later deliveries of it do
// not run the work again, and an operator can list it and replay it. Every
// store in this module implements it; the gateway's terminal failures
// (gateway.Permanent, RouteOptions.MaxAttempts) and idemgate's failed and
// retry commands are built on it.
type Failer interface {
	// Fail records that c's work failed, when c still owns its CLAIMED
	// record (fence and token): the record's attempt count rises by one,
	// it keeps f.Reason, and the time of its first failure if it had none.
	// When f.Final is set, or f.MaxAttempts is positive and the count
	// reaches it, the record goes FAILED: it keeps its fence, its lease
	// ends now, and it expires a ttl from now, like a DONE record.
	// Otherwise the claim is released as Release releases it (the fence
	// rises; the key is claimable at once), and the record keeps the count
	// for the next holder's failure.
	//
	// It returns the record's attempt count and whether the record is now
	// FAILED. A record already FAILED under c's fence answers its count
	// and true, changing nothing, so a Fail retried after a lost reply is
	// harmless. Any other record (c was fenced out, released, or its
	// record is gone) is left alone, and Fail returns 0 and false. A claim
	// that was not won is refused with an error wrapping ErrNotWon; a
	// reason that CheckReason refuses, with its error.
	Fail(ctx context.Context, c Claim, f Failure) (attempts int, failed bool, err error)

	// Retry makes key's FAILED record claimable again, for an operator
	// who fixed what made it fail, and reports whether it did: the record
	// becomes a released claim (as Forget leaves it: a higher fence, no
	// token, no fingerprint) with its attempt count, reason and first
	// failure cleared, so the next delivery runs the work with a fresh
	// budget. A record in any other state, or none, is left alone and
	// Retry returns false: a retry that comes after the key was retried,
	// completed or forgotten changes nothing.
	Retry(ctx context.Context, key string) (bool, error)
}

// Failure describes a failed attempt, for [Failer.Fail].
type Failure struct {
	// Reason says why, in at most MaxReasonLen bytes of printable UTF-8
	// (see MakeReason); it should hold no key when keys are personal data.
	Reason string
	// Final makes the record FAILED whatever its count: the error can
	// never succeed (gateway.Permanent).
	Final bool
	// MaxAttempts, when positive, makes the record FAILED once its count
	// reaches it.
	MaxAttempts int
}

// MaxReasonLen is the longest failure reason, in bytes, that stores keep.
const MaxReasonLen = 256

// ErrInvalidReason is wrapped by the error of [CheckReason].
var ErrInvalidReason = errors.New("store: invalid failure reason")

// CheckReason reports whether reason can be stored: at most [MaxReasonLen]
// bytes of UTF-8 without control characters. Stores return its error
// unchanged from Fail.
func CheckReason(reason string) error {
	return checkLine(ErrInvalidReason, reason, MaxReasonLen)
}

// MakeReason returns text as a reason that [CheckReason] accepts: bytes
// that are not UTF-8 and control characters become U+FFFD, and a text too
// long is cut short on a character boundary, marked with "…".
func MakeReason(text string) string { return printable(text, MaxReasonLen) }

// FailedAttempts decides the outcome of a failure on a record that had
// failed attempts before it: the new count, and whether the record goes
// FAILED. Stores call it so that they all decide alike.
func (f Failure) FailedAttempts(attempts int) (int, bool) {
	attempts++
	return attempts, f.Final || f.MaxAttempts > 0 && attempts >= f.MaxAttempts
}
