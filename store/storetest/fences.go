package storetest

import (
	"errors"
	"time"

	"github.com/idemgate/idemgate/store"
)

// fencesNeverRepeat: a record deleted as the store's expiry deletes it (a
// purge, a Redis expiry, a TTL policy, a sweep) and made anew by the next
// Claim must start above every fence the deleted one handed out, and the
// deleted record's holder must be fenced out of the new claim by every
// operation: Complete, Release, Extend and CompleteTx.
func fencesNeverRepeat(e *env) {
	e.expect(e.cfg.Delete != nil, "Config.Delete is nil: the suite cannot delete a record as the store's expiry does, so it cannot check that a record made anew never repeats a fence")
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	e.pass(e.lease() + e.tick) // past the lease and the ttl: the record has expired
	e.cfg.Delete(e.t, e.s, "k")
	b := e.claim("k", e.lease(), store.Won, "Claim after the record was deleted must win")
	e.expect(b.Fence > a.Fence, "Claim after the record was deleted: fence = %d, want above the deleted record's %d (a key's fences must never repeat, whatever deletes its record)", b.Fence, a.Fence)
	e.fencedOutOf(a, b, "the deleted record's holder")
}

// tokenChecked: a claim that carries the holder's fence but another token
// owns nothing. Complete, Release, Extend and CompleteTx compare both.
func tokenChecked(e *env) {
	b := e.claim("k", e.lease(), store.Won, "first Claim must win")
	forged := b
	forged.Token = "not-the-holders-token"
	e.fencedOutOf(forged, b, "a claim with the holder's fence and another token")
}

// fencedOutOf checks that every operation of stale leaves the live claim b
// as it was, then that b still owns its record. With a real clock b's
// lease (half a tick) is first extended to an hour, where the store can,
// so that it cannot lapse while the checks run.
func (e *env) fencedOutOf(stale, b store.Claim, who string) {
	x, canExtend := e.s.(store.Extender)
	if canExtend {
		var err error
		b, err = x.Extend(e.ctx, b, long)
		e.must(err, "Extend of the live claim")
	}
	e.complete(stale, false, who+": Complete must return false")
	e.release(stale, who+": Release must be ignored")
	if canExtend {
		e.extendFenced(x, stale, who)
	}
	if e.cfg.InTx != nil {
		err := e.cfg.InTx(e.ctx, e.s, func(complete func(store.Claim) error) error {
			return complete(stale)
		})
		e.expect(errors.Is(err, store.ErrFenced), "%s: CompleteTx error = %v, want store.ErrFenced", who, err)
	}
	h := e.claim("k", e.lease(), store.HeldByOther, who+": the live claim must still hold the key")
	e.expect(h.Fence == b.Fence, "%s: HeldByOther fence = %d, want the live claim's %d", who, h.Fence, b.Fence)
	if canExtend {
		_, err := x.Extend(e.ctx, b, long)
		e.must(err, who+": the live claim's Extend must still succeed")
	}
	e.complete(b, true, who+": the live claim must still complete")
}

// leaseTooLong: a store refuses a lease that is not shorter than its ttl,
// with an error wrapping store.ErrLeaseTooLong, and writes nothing.
func leaseTooLong(e *env) {
	for _, lease := range []time.Duration{e.tick, 2 * e.tick} {
		c, err := e.s.Claim(e.ctx, "k", lease, store.ClaimOptions{})
		e.expect(errors.Is(err, store.ErrLeaseTooLong), "Claim with lease %v on a store whose ttl is %v = %v, %v; want an error wrapping store.ErrLeaseTooLong", lease, e.tick, c.Status, err)
	}
	e.claim("k", e.lease(), store.Won, "a refused Claim must leave the key absent")
}
