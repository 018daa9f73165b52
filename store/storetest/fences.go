package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
)

// fencesNeverRepeat: a record deleted as the store's expiry deletes it (a
// purge, a Redis expiry, a TTL policy, a sweep) and made anew by the next
// Claim must start above every fence the deleted one handed out, and the
// deleted record's holder must be fenced out of the new claim by every
// operation: Complete, Release, Extend and CompleteTx.
func fencesNeverRepeat(e *env) error {
	if e.cfg.Delete == nil {
		return errors.New("Config.Delete is nil: the suite cannot delete a record as the store's expiry does, so it cannot check that a record made anew never repeats a fence")
	}
	a, err := e.claimE("k", e.lease(), store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.lease() + e.tick) // past the lease and the ttl: the record has expired
	e.cfg.Delete(e.t, e.s, "k")
	b, err := e.claimE("k", e.lease(), store.Won, "Claim after the record was deleted must win")
	if err != nil {
		return err
	}
	if b.Fence <= a.Fence {
		return violated("Claim after the record was deleted: fence = %d, want above the deleted record's %d (a key's fences must never repeat, whatever deletes its record)", b.Fence, a.Fence)
	}
	return fencedOutOf(e, a, b, "the deleted record's holder")
}

// tokenChecked: a claim that carries the holder's fence but another token
// owns nothing. Complete, Release, Extend and CompleteTx compare both.
func tokenChecked(e *env) error {
	b, err := e.claimE("k", e.lease(), store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	forged := b
	forged.Token = "not-the-holders-token"
	return fencedOutOf(e, forged, b, "a claim with the holder's fence and another token")
}

// fencedOutOf checks that every operation of stale leaves the live claim b
// as it was, then that b still owns its record. With a real clock b's
// lease (half a tick) is first extended to an hour, where the store can,
// so that it cannot lapse while the checks run.
func fencedOutOf(e *env, stale, b store.Claim, who string) error {
	x, canExtend := e.s.(store.Extender)
	if canExtend {
		var err error
		if b, err = x.Extend(e.ctx, b, long); err != nil {
			return violated("Extend of the live claim: %v", err)
		}
	}
	if err := e.completeE(stale, false, who+": Complete must return false"); err != nil {
		return err
	}
	if err := e.releaseE(stale, who+": Release must be ignored"); err != nil {
		return err
	}
	if canExtend {
		if _, err := x.Extend(e.ctx, stale, long); !errors.Is(err, store.ErrFenced) {
			return violated("%s: Extend error = %v, want store.ErrFenced", who, err)
		}
	}
	if e.cfg.InTx != nil {
		err := e.cfg.InTx(e.ctx, e.s, func(complete func(store.Claim) error) error {
			return complete(stale)
		})
		if !errors.Is(err, store.ErrFenced) {
			return violated("%s: CompleteTx error = %v, want store.ErrFenced", who, err)
		}
	}
	h, err := e.claimE("k", e.lease(), store.HeldByOther, who+": the live claim must still hold the key")
	if err != nil {
		return err
	}
	if h.Fence != b.Fence {
		return violated("%s: HeldByOther fence = %d, want the live claim's %d", who, h.Fence, b.Fence)
	}
	if canExtend {
		if _, err := x.Extend(e.ctx, b, long); err != nil {
			return fmt.Errorf("%s: the live claim's Extend must still succeed: %w", who, err)
		}
	}
	return e.completeE(b, true, who+": the live claim must still complete")
}

// leaseTooLong: a store refuses a lease that is not shorter than its ttl,
// with an error wrapping store.ErrLeaseTooLong, and writes nothing.
func leaseTooLong(e *env) error {
	for _, lease := range []time.Duration{e.tick, 2 * e.tick} {
		if c, err := e.s.Claim(e.ctx, "k", lease, store.ClaimOptions{}); !errors.Is(err, store.ErrLeaseTooLong) {
			return violated("Claim with lease %v on a store whose ttl is %v = %v, %v; want an error wrapping store.ErrLeaseTooLong", lease, e.tick, c.Status, err)
		}
	}
	_, err := e.claimE("k", e.lease(), store.Won, "a refused Claim must leave the key absent")
	return err
}
