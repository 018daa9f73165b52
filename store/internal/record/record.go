// Package record holds what the stores that decide on the client share
// (datastorestore, firestorestore): the record, the transitions of the store
// contract as pure functions, the four store operations built on one
// read-modify-write primitive, the retry loop around it, and Complete inside
// a transaction of the caller's (CompleteTx).
package record

import (
	"time"

	"github.com/idemgate/idemgate/store"
)

// The values of the state property.
const (
	StateClaimed = "CLAIMED"
	StateDone    = "DONE"
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
}

// Rules are the transitions of the store package documentation, as pure
// functions of the record read (nil when absent) and the clock. Each returns
// the record to write, or nil when the operation writes nothing.
type Rules struct {
	TTL  time.Duration
	Skew time.Duration // how long past leaseUntil or expiresAt a record is still honoured
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

// held reports whether r is a claim whose holder may still be working.
// A released claim (empty token) is free at once, whatever the clocks say.
func (p Rules) held(r *Record, now time.Time) bool {
	return r.State == StateClaimed && r.Token != "" && now.Before(r.LeaseUntil.Add(p.Skew))
}

// Claim decides a Claim with a fresh token and the caller's fingerprint fp
// (nil for none), which a won claim keeps in place of the record's.
func (p Rules) Claim(r *Record, key, token string, fp []byte, lease time.Duration, now time.Time) (store.Claim, *Record) {
	var fence int64 // the fence being replaced: 0 for a new record
	switch {
	case !p.live(r, now):
		if r != nil {
			fence = r.Fence
		}
	case r.State == StateClaimed && r.Token != "" && r.Token == token:
		return won(key, r), nil // a retry of the call that won: re-affirm
	case p.held(r, now):
		return store.Claim{Key: key, Status: store.HeldByOther, Fence: r.Fence, LeaseUntil: r.LeaseUntil, Fingerprint: r.Fingerprint}, nil
	case r.State == StateDone:
		return store.Claim{Key: key, Status: store.AlreadyDone, Fence: r.Fence, Fingerprint: r.Fingerprint}, nil
	default: // a lapsed or released claim
		fence = r.Fence
	}
	next := &Record{State: StateClaimed, Fence: fenceAt(fence, now), Token: token, LeaseUntil: micro(now.Add(lease)), Fingerprint: fp}
	next.ExpiresAt = micro(next.LeaseUntil.Add(p.TTL))
	return won(key, next), next
}

// Complete decides a Complete of c.
func (p Rules) Complete(r *Record, c store.Claim, now time.Time) (bool, *Record) {
	if !p.live(r, now) || !owns(r, c) {
		return false, nil
	}
	if r.State == StateDone {
		return true, nil
	}
	next := *r
	next.State = StateDone
	next.ExpiresAt = micro(now.Add(p.TTL))
	return true, &next
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
// there but a transaction run twice, which must fail.
func (p Rules) CompleteTx(r *Record, c store.Claim, now time.Time) (TxOutcome, *Record) {
	switch ok, next := p.Complete(r, c, now); {
	case !ok:
		return TxFenced, nil
	case next == nil:
		return TxDoneAlready, nil
	default:
		return TxCompleted, next
	}
}

// Release decides a Release of c: the fence rises and the token empties,
// so a released claim is free at once and can never be re-affirmed; the
// fingerprint goes with the claim.
func (p Rules) Release(r *Record, c store.Claim, now time.Time) *Record {
	if !p.live(r, now) || r.State != StateClaimed || !owns(r, c) {
		return nil
	}
	return p.released(r, now)
}

// released is r made a released claim at now, as Release and Forget leave
// it: a higher fence, no token, no fingerprint, its lease ended, and an
// expiry at least a ttl away, so that a TTL policy deletes it no sooner
// than a ttl after the fence it now holds.
func (p Rules) released(r *Record, now time.Time) *Record {
	next := *r
	next.State = StateClaimed
	next.Fence = fenceAt(r.Fence, now)
	next.Token = ""
	next.Fingerprint = nil
	next.LeaseUntil = micro(now)
	if e := micro(now.Add(p.TTL)); e.After(next.ExpiresAt) {
		next.ExpiresAt = e
	}
	return &next
}

// Extend decides an Extend.
func (p Rules) Extend(r *Record, c store.Claim, lease time.Duration, now time.Time) (store.Claim, *Record, error) {
	if !p.live(r, now) || r.State != StateClaimed || !owns(r, c) {
		return store.Claim{}, nil, store.ErrFenced
	}
	next := *r
	next.LeaseUntil = micro(now.Add(lease))
	if e := micro(next.LeaseUntil.Add(p.TTL)); e.After(next.ExpiresAt) {
		next.ExpiresAt = e
	}
	return won(c.Key, &next), &next, nil
}

func won(key string, r *Record) store.Claim {
	return store.Claim{Key: key, Status: store.Won, Fence: r.Fence, Token: r.Token, LeaseUntil: r.LeaseUntil, Fingerprint: r.Fingerprint}
}

// micro drops what Datastore and Firestore cannot store, so that the times
// a call returns are exactly those a later read sees.
func micro(t time.Time) time.Time { return t.Truncate(time.Microsecond) }
