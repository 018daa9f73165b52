package storetest

import (
	"bytes"
	"errors"

	"github.com/idemgate/idemgate/store"
)

// notWonClaimRefused checks that Complete, Release, Extend and CompleteTx
// refuse a claim whose Status is not Won with store.ErrNotWon, and leave the
// record as it was. An AlreadyDone or HeldByOther claim carries the
// record's fence, which is the holder's: taken for a proof of ownership, it
// would complete or release somebody else's claim.
func notWonClaimRefused(e *env) {
	a := e.claim("held", long, store.Won, "first Claim must win")
	held := e.claim("held", long, store.HeldByOther, "a second Claim of a live claim must be held by other")
	d := e.claim("done", long, store.Won, "first Claim must win")
	e.complete(d, true, "Complete of a live claim")
	done := e.claim("done", long, store.AlreadyDone, "Claim of a DONE key must be already done")
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
		e.refusesNotWon(c.claim, c.what)
	}
	e.complete(a, true, "the holder must still Complete after the refused calls")
	e.claim("held", long, store.AlreadyDone, "the holder's Complete must leave the key DONE")
}

// refusesNotWon calls every operation that takes a claim with c, which is
// not won, and checks that each is refused and that c's record is left as
// it was.
func (e *env) refusesNotWon(c store.Claim, what string) {
	before := e.inspect(c.Key, true, "the record of "+what)
	refused := func(op string, err error) {
		e.expect(errors.Is(err, store.ErrNotWon), "%s with %s = %v, want an error matching store.ErrNotWon", op, what, err)
		after := e.inspect(c.Key, true, op+" with "+what)
		e.expect(sameRecord(before, after), "%s with %s changed the record from %+v to %+v; a refused call must write nothing", op, what, before, after)
	}
	ok, err := e.s.Complete(e.ctx, c)
	e.expect(!ok, "Complete with %s = true, want false and store.ErrNotWon", what)
	refused("Complete", err)
	refused("Release", e.s.Release(e.ctx, c))
	if ext, ok := e.s.(store.Extender); ok {
		_, err := ext.Extend(e.ctx, c, long)
		e.expect(!errors.Is(err, store.ErrFenced), "Extend with %s = %v, want store.ErrNotWon, not ErrFenced", what, err)
		refused("Extend", err)
	}
	if e.cfg.InTx == nil {
		return
	}
	var inner error
	err = e.inTx(func(complete func(store.Claim) error) error {
		inner = complete(c)
		return nil // commit anyway: a refused CompleteTx must have written nothing
	})
	e.must(err, "committing after CompleteTx with "+what)
	e.expect(!errors.Is(inner, store.ErrFenced), "CompleteTx with %s = %v, want store.ErrNotWon, not ErrFenced", what, inner)
	refused("CompleteTx", inner)
}

// sameRecord reports whether a and b are the same record, read twice.
func sameRecord(a, b store.Record) bool {
	return a.State == b.State && a.Fence == b.Fence && a.Token == b.Token &&
		a.LeaseUntil.Equal(b.LeaseUntil) && a.ExpiresAt.Equal(b.ExpiresAt) &&
		bytes.Equal(a.Fingerprint, b.Fingerprint)
}
