// Package record holds what the stores that decide on the client share:
// the record, the transitions of the store contract as pure functions
// (Rules), which memstore, datastorestore and firestorestore all run, and,
// for the Google stores, the store operations built on one
// read-modify-write round ([Ops]) with their retries and CompleteTx. The
// stores differ only in what Rules are told: a skew margin and microseconds
// for Datastore and Firestore; no margin and nanoseconds for memstore (Exact).
package record

import (
	"time"

	"github.com/idemgate/idemgate/store"
)

// The values of the state property.
const (
	StateClaimed = "CLAIMED"
	StateDone    = "DONE"
	StateFailed  = "FAILED"
)

// Record is what a stored entity or document holds. See the store package
// documentation for the meaning of each field.
type Record struct {
	State       string
	Fence       int64
	Token       string // empty once released
	LeaseUntil  time.Time
	ExpiresAt   time.Time
	Key         string // set only when the stored name is a hash of the key
	Fingerprint []byte // the payload fingerprint kept at Won; nil for none
	// Origin names the delivery whose Claim won the record; "" for none.
	// Release and Forget keep it: the last holder's.
	Origin string
	// Attempts counts the failed attempts (Fail), Reason is the last one's
	// and FirstFailure the first one's instant; zero when none failed.
	Attempts     int
	Reason       string
	FirstFailure time.Time
}

// Rules are the transitions of the store package documentation, as pure
// functions of the record read (nil when absent) and the clock. Each returns
// the record to write and whether to write it; the record read is never
// changed. They return records by value so that a caller deciding in
// memory (memstore) allocates nothing for a decision.
type Rules struct {
	TTL  time.Duration
	Skew time.Duration // how long past leaseUntil or expiresAt a record is still honoured
	// Exact keeps the times written to the nanosecond (memstore); by
	// default they are truncated to the microsecond, what Datastore and
	// Firestore keep.
	Exact bool
}

// live reports whether r exists and has not expired: an expired record
// counts as absent, except that its fence carries on.
func (p Rules) live(r *Record, now time.Time) bool {
	return r != nil && now.Before(r.ExpiresAt.Add(p.Skew))
}

// owns reports whether c owns r: the same fence and, on a CLAIMED record,
// the same token. A DONE record needs no token: its fence names the claim
// that completed it, since fences never repeat.
func owns(r *Record, c store.Claim) bool {
	return r.Fence == c.Fence && (r.State == StateDone || r.Token == c.Token)
}

// fenceAt is store.FenceAt on the process's clock: the fence a write raises
// old to at now.
func fenceAt(old int64, now time.Time) int64 { return store.FenceAt(old, now.UnixMicro()) }

// Claim decides a Claim with the caller's fingerprint fp (nil for none)
// and origin, which a won claim keeps in place of the record's; the record
// to write, and the claim returned, share fp's array. token gives the call's token:
// Claim calls it at most once, and only when the token counts (a CLAIMED
// record to compare it with, or a win), so that a caller drawing a fresh
// token per call draws none for a duplicate.
func (p Rules) Claim(r *Record, key string, token func() string, fp []byte, origin string, lease time.Duration, now time.Time) (c store.Claim, next Record, write bool) {
	live := p.live(r, now)
	if live && r.State == StateDone {
		return store.Claim{Key: key, Status: store.AlreadyDone, Fence: r.Fence, Fingerprint: r.Fingerprint, Origin: r.Origin}, Record{}, false
	}
	if live && r.State == StateFailed {
		return store.Claim{Key: key, Status: store.AlreadyFailed, Fence: r.Fence, Fingerprint: r.Fingerprint, Origin: r.Origin, Attempts: r.Attempts, Reason: r.Reason}, Record{}, false
	}
	var tok string
	// A CLAIMED record with a token has a holder that may still be working
	// until its lease ends; a released one (no token) is free at once,
	// whatever the clocks say.
	if live && r.Token != "" {
		if tok = token(); tok == r.Token {
			return won(key, r), Record{}, false // a retry of the call that won: re-affirm
		}
		if now.Before(r.LeaseUntil.Add(p.Skew)) {
			return store.Claim{Key: key, Status: store.HeldByOther, Fence: r.Fence, LeaseUntil: r.LeaseUntil, Fingerprint: r.Fingerprint, Origin: r.Origin}, Record{}, false
		}
	} else {
		tok = token()
	}
	// Absent, expired, lapsed or released: the call wins, above the fence
	// of any record there (an expired one's fence carries on).
	var fence int64
	if r != nil {
		fence = r.Fence
	}
	next = Record{State: StateClaimed, Fence: fenceAt(fence, now), Token: tok, LeaseUntil: p.kept(now.Add(lease)), Fingerprint: fp, Origin: origin}
	if live { // a released or lapsed claim: the failures of its holders add up
		next.Attempts, next.Reason, next.FirstFailure = r.Attempts, r.Reason, r.FirstFailure
	}
	next.ExpiresAt = p.kept(next.LeaseUntil.Add(p.TTL))
	return won(key, &next), next, true
}

// Complete decides a Complete of c: ok is Complete's answer.
func (p Rules) Complete(r *Record, c store.Claim, now time.Time) (ok bool, next Record, write bool) {
	if !p.live(r, now) || r.State == StateFailed || !owns(r, c) {
		return false, Record{}, false
	}
	if r.State == StateDone {
		return true, Record{}, false
	}
	// The lease ends at the completion, which LeaseUntil then records.
	next = *r
	next.State = StateDone
	next.LeaseUntil = p.kept(now)
	next.ExpiresAt = p.kept(now.Add(p.TTL))
	return true, next, true
}

// TxOutcome is how Rules.CompleteTx decides.
type TxOutcome uint8

// The outcomes of Rules.CompleteTx. The zero TxOutcome is TxFenced.
const (
	TxFenced      TxOutcome = iota // the fence does not own the record
	TxCompleted                    // the record was CLAIMED under the fence: write it DONE
	TxDoneAlready                  // the record is DONE under the fence already
)

// CompleteTx decides a Complete inside the caller's transaction: as
// Complete, except that a record DONE already under the fence is no retry
// there but a transaction run twice, which must fail. next is the record to
// write when the outcome is TxCompleted.
func (p Rules) CompleteTx(r *Record, c store.Claim, now time.Time) (TxOutcome, Record) {
	switch ok, next, write := p.Complete(r, c, now); {
	case !ok:
		return TxFenced, Record{}
	case !write:
		return TxDoneAlready, Record{}
	default:
		return TxCompleted, next
	}
}

// Release decides a Release of c: the fence rises and the token empties,
// so a released claim is free at once and can never be re-affirmed; the
// fingerprint goes with the claim.
func (p Rules) Release(r *Record, c store.Claim, now time.Time) (next Record, write bool) {
	if !p.live(r, now) || r.State != StateClaimed || !owns(r, c) {
		return Record{}, false
	}
	return p.released(r, now), true
}

// released is r made a released claim at now, as Release and Forget leave
// it: a higher fence, no token, no fingerprint (but the last holder's
// origin), its lease ended, and an
// expiry at least a ttl away, so that a TTL policy deletes it no sooner
// than a ttl after the fence it now holds.
func (p Rules) released(r *Record, now time.Time) Record {
	next := *r
	next.State = StateClaimed
	next.Fence = fenceAt(r.Fence, now)
	next.Token = ""
	next.Fingerprint = nil
	next.LeaseUntil = p.kept(now)
	if e := p.kept(now.Add(p.TTL)); e.After(next.ExpiresAt) {
		next.ExpiresAt = e
	}
	return next
}

// Fail decides a Fail of c with f (see store.Failer): attempts and failed
// are Fail's answer.
func (p Rules) Fail(r *Record, c store.Claim, f store.Failure, now time.Time) (attempts int, failed bool, next Record, write bool) {
	switch {
	case !p.live(r, now):
		return 0, false, Record{}, false
	case r.State == StateFailed && r.Fence == c.Fence:
		return r.Attempts, true, Record{}, false // a retry of the Fail that made it
	case r.State != StateClaimed || !owns(r, c):
		return 0, false, Record{}, false
	}
	attempts, failed = f.FailedAttempts(r.Attempts)
	if failed {
		next = *r
		next.State = StateFailed
		next.LeaseUntil = p.kept(now)
		next.ExpiresAt = p.kept(now.Add(p.TTL))
	} else {
		next = p.released(r, now)
	}
	next.Attempts, next.Reason = attempts, f.Reason
	if next.FirstFailure.IsZero() {
		next.FirstFailure = p.kept(now)
	}
	return attempts, failed, next, true
}

// Retry decides a Retry: a live FAILED record becomes a released claim
// with a higher fence and no failures; any other is left alone.
func (p Rules) Retry(r *Record, now time.Time) (next Record, write bool) {
	if !p.live(r, now) || r.State != StateFailed {
		return Record{}, false
	}
	return p.forgotten(r, now), true
}

// forgotten is r freed by an operator (Forget, Retry): released, with its
// failures cleared.
func (p Rules) forgotten(r *Record, now time.Time) Record {
	next := p.released(r, now)
	next.Attempts, next.Reason, next.FirstFailure = 0, "", time.Time{}
	return next
}

// Extend decides an Extend: it writes next exactly when err is nil.
func (p Rules) Extend(r *Record, c store.Claim, lease time.Duration, now time.Time) (out store.Claim, next Record, err error) {
	if !p.live(r, now) || r.State != StateClaimed || !owns(r, c) {
		return store.Claim{}, Record{}, store.ErrFenced
	}
	next = *r
	next.LeaseUntil = p.kept(now.Add(lease))
	if e := p.kept(next.LeaseUntil.Add(p.TTL)); e.After(next.ExpiresAt) {
		next.ExpiresAt = e
	}
	return won(c.Key, &next), next, nil
}

func won(key string, r *Record) store.Claim {
	return store.Claim{Key: key, Status: store.Won, Fence: r.Fence, Token: r.Token, LeaseUntil: r.LeaseUntil, Fingerprint: r.Fingerprint, Origin: r.Origin}
}

// kept drops what the store cannot keep of t, so that the times a call
// returns are exactly those a later read sees: the monotonic clock
// reading, and what is below the microsecond unless Exact.
func (p Rules) kept(t time.Time) time.Time {
	if p.Exact {
		return t.Round(0)
	}
	return t.Truncate(time.Microsecond)
}
