package storetest

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/store"
)

// notWonClaimRefused checks that Complete, Release, Extend and CompleteTx
// refuse a claim whose Status is not Won with store.ErrNotWon, and leave the
// record as it was. An AlreadyDone or HeldByOther claim carries the
// record's fence, which is the holder's: taken for a proof of ownership, it
// would complete or release somebody else's claim.
func notWonClaimRefused(e *env) error {
	x, err := inspector(e)
	if err != nil {
		return err
	}
	a, err := e.claimE("held", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	held, err := e.claimE("held", long, store.HeldByOther, "a second Claim of a live claim must be held by other")
	if err != nil {
		return err
	}
	d, err := e.claimE("done", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.completeE(d, true, "Complete of a live claim"); err != nil {
		return err
	}
	done, err := e.claimE("done", long, store.AlreadyDone, "Claim of a DONE key must be already done")
	if err != nil {
		return err
	}
	noStatus := a
	noStatus.Status = 0
	for _, c := range []struct {
		what  string
		claim store.Claim
	}{
		{"a HeldByOther claim (the holder's fence)", held},
		{"an AlreadyDone claim (the record's fence)", done},
		{"a claim with no Status (the holder's fence)", noStatus},
	} {
		if err := e.refusesNotWon(x, c.claim, c.what); err != nil {
			return err
		}
	}
	if err := e.completeE(a, true, "the holder must still Complete after the refused calls"); err != nil {
		return err
	}
	_, err = e.claimE("held", long, store.AlreadyDone, "the holder's Complete must leave the key DONE")
	return err
}

// refusesNotWon calls every operation that takes a claim with c, which is
// not won, and checks that each is refused and that c's record is left as
// it was.
func (e *env) refusesNotWon(x store.Inspector, c store.Claim, what string) error {
	before, err := e.inspect(x, c.Key, true, "the record of "+what)
	if err != nil {
		return err
	}
	refused := func(op string, err error) error {
		if !errors.Is(err, store.ErrNotWon) {
			return violated("%s with %s = %v, want an error matching store.ErrNotWon", op, what, err)
		}
		after, err := e.inspect(x, c.Key, true, op+" with "+what)
		if err != nil {
			return err
		}
		if !sameRecord(before, after) {
			return violated("%s with %s changed the record from %+v to %+v; a refused call must write nothing", op, what, before, after)
		}
		return nil
	}
	ok, err := e.s.Complete(e.ctx, c)
	if ok {
		return violated("Complete with %s = true, want false and store.ErrNotWon", what)
	}
	if err := refused("Complete", err); err != nil {
		return err
	}
	if err := refused("Release", e.s.Release(e.ctx, c)); err != nil {
		return err
	}
	if ext, ok := e.s.(store.Extender); ok {
		_, err := ext.Extend(e.ctx, c, long)
		if errors.Is(err, store.ErrFenced) {
			return violated("Extend with %s = %v, want store.ErrNotWon, not ErrFenced", what, err)
		}
		if err := refused("Extend", err); err != nil {
			return err
		}
	}
	if e.cfg.InTx == nil {
		return nil
	}
	var inner error
	err = e.inTx(func(complete func(store.Claim) error) error {
		inner = complete(c)
		return nil // commit anyway: a refused CompleteTx must have written nothing
	})
	if err != nil {
		return fmt.Errorf("committing after CompleteTx with %s: %w", what, err)
	}
	if errors.Is(inner, store.ErrFenced) {
		return violated("CompleteTx with %s = %v, want store.ErrNotWon, not ErrFenced", what, inner)
	}
	return refused("CompleteTx", inner)
}

// sameRecord reports whether a and b are the same record, read twice.
func sameRecord(a, b store.Record) bool {
	return a.State == b.State && a.Fence == b.Fence && a.Token == b.Token &&
		a.LeaseUntil.Equal(b.LeaseUntil) && a.ExpiresAt.Equal(b.ExpiresAt) &&
		bytes.Equal(a.Fingerprint, b.Fingerprint)
}
