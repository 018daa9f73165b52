package storetest

import (
	"errors"
	"reflect"
	"sync/atomic"

	"github.com/idemgate/idemgate/store"
)

// txCases run when Config.InTx is set: completion inside the caller's
// transaction commits or rolls back with it, and is fenced like Complete.
var txCases = []testCase{
	{"TxCompleteCommits", longTTL, txCompleteCommits},
	{"TxCompleteRollsBack", longTTL, txCompleteRollsBack},
	{"TxCompleteFenced", longTTL, txCompleteFenced},
	{"TxCompleteTwice", longTTL, txCompleteTwice},
	{"TxCompleteEntersTx", longTTL, txCompleteEntersTx},
}

// casesFor returns the cases cfg's store must pass.
func casesFor(cfg Config) []testCase {
	if cfg.InTx != nil {
		return append(cases[:len(cases):len(cases)], txCases...)
	}
	return cases
}

// txConfigured fails a store that can complete inside a transaction (it
// has a CompleteTx method) when the Config gives no InTx to test it with.
func txConfigured(e *env) {
	if e.cfg.InTx == nil && reflect.ValueOf(e.s).MethodByName("CompleteTx").IsValid() {
		e.fail("%T has a CompleteTx method but Config.InTx is nil: set it so that the suite runs the transactional cases", e.s)
	}
}

var errRollback = errors.New("storetest: the caller's transaction fails after CompleteTx")

// inTx runs fn in a transaction of the store's database.
func (e *env) inTx(fn func(complete func(store.Claim) error) error) error {
	return e.cfg.InTx(e.ctx, e.s, fn)
}

// txComplete completes c in a transaction that commits, and fails unless
// that succeeds.
func (e *env) txComplete(c store.Claim, rule string) {
	err := e.inTx(func(complete func(store.Claim) error) error { return complete(c) })
	e.must(err, rule+": CompleteTx in a committed transaction")
}

func txCompleteCommits(e *env) {
	a := e.claim("k", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick) // lapsed, but nobody reclaimed: no lease check, as Complete
	e.txComplete(a, "CompleteTx of the live fence must commit")
	d := e.claim("k", long, store.AlreadyDone, "a committed CompleteTx must leave the key DONE")
	e.fenceIs(d, a.Fence, "a committed CompleteTx must keep the claim's fence")
	e.complete(a, true, "Complete after a committed CompleteTx with the same fence must answer true (the gateway's own Complete)")
}

func txCompleteRollsBack(e *env) {
	for _, then := range []string{"complete", "release"} {
		key := "k-" + then
		a := e.claim(key, long, store.Won, "first Claim must win")
		var inner error
		err := e.inTx(func(complete func(store.Claim) error) error {
			if inner = complete(a); inner != nil {
				return inner
			}
			return errRollback
		})
		e.must(inner, "CompleteTx of the live fence")
		e.expect(errors.Is(err, errRollback), "a transaction whose body fails after CompleteTx returned %v, want the body's error", err)
		e.claim(key, long, store.HeldByOther, "a rolled-back CompleteTx must leave the key CLAIMED")
		if then == "complete" {
			e.complete(a, true, "the claim must still Complete after its CompleteTx rolled back")
			e.claim(key, long, store.AlreadyDone, "Complete after a rollback must leave the key DONE")
			continue
		}
		e.release(a, "the claim must still Release after its CompleteTx rolled back")
		b := e.claim(key, long, store.Won, "Release after a rollback must free the key")
		e.expect(b.Fence > a.Fence, "Claim after a rollback and a Release: fence %d, want above %d", b.Fence, a.Fence)
	}
}

func txCompleteFenced(e *env) {
	fenced := func(c store.Claim, rule string) {
		var inner error
		err := e.inTx(func(complete func(store.Claim) error) error {
			inner = complete(c)
			return nil // commit anyway: a fenced CompleteTx must have written nothing
		})
		e.must(err, rule+": committing after a fenced CompleteTx")
		e.expect(errors.Is(inner, store.ErrFenced), "%s: CompleteTx = %v, want an error matching store.ErrFenced", rule, inner)
	}
	fenced(store.Claim{Key: "absent", Status: store.Won, Fence: 1, Token: "t"}, "CompleteTx of an absent record")
	e.claim("absent", long, store.Won, "a fenced CompleteTx must not create the record")

	zombie := e.claim("k", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	b := e.claim("k", long, store.Won, "Claim after lapse must win")
	fenced(zombie, "CompleteTx by a zombie after a reclaim")
	e.claim("k", long, store.HeldByOther, "a zombie's CompleteTx must leave its successor holding the key")
	e.txComplete(b, "the successor's CompleteTx must commit after the zombie's")
	fenced(zombie, "CompleteTx by a zombie on its successor's DONE record")

	r := e.claim("r", long, store.Won, "first Claim must win")
	e.release(r, "Release of a live claim")
	fenced(r, "CompleteTx of a released claim")
	e.claim("r", long, store.Won, "a released key must stay free after a fenced CompleteTx")
}

// txCompleteTwice is a business transaction run again after its first
// commit landed (its reply lost, say): the second CompleteTx of the claim
// meets the DONE record its own first commit made, and must fail the
// transaction with ErrFenced, or the work would commit twice. The gateway's
// own Complete still answers true.
func txCompleteTwice(e *env) {
	a := e.claim("k", long, store.Won, "first Claim must win")
	e.txComplete(a, "CompleteTx of the live fence must commit")
	before := e.inspect("k", true, "the record after a committed CompleteTx")
	var inner error
	err := e.inTx(func(complete func(store.Claim) error) error {
		inner = complete(a)
		return inner
	})
	e.expect(errors.Is(inner, store.ErrFenced), "CompleteTx again on the DONE record of its own fence = %v, want an error matching store.ErrFenced: a transaction run again must not commit its effects twice", inner)
	e.expect(errors.Is(err, store.ErrFenced), "a transaction failed by its CompleteTx on a DONE record returned %v, want the CompleteTx's error", err)
	after := e.inspect("k", true, "the record after a refused second CompleteTx")
	e.expect(sameRecord(before, after), "a refused second CompleteTx changed the record from %+v to %+v", before, after)
	e.complete(a, true, "Complete after a refused second CompleteTx must still answer true (the gateway's own Complete)")
	d := e.claim("k", long, store.AlreadyDone, "the key must stay DONE")
	e.fenceIs(d, a.Fence, "the key must stay DONE under the claim's fence")
}

// txCompleteEntersTx checks that every CompleteTx calls store.EnterTx with
// its claim, whatever the record turns out to be: it must do so before it
// reads the record, so that the gateway stops renewing a lease whose record
// the transaction is about to lock.
func txCompleteEntersTx(e *env) {
	var calls, entered atomic.Int64
	try := func(c store.Claim, commit bool) error {
		c = store.OnEnterTx(c, store.TxWatcherFunc(func() { entered.Add(1) }))
		return e.inTx(func(complete func(store.Claim) error) error {
			calls.Add(1)
			err := complete(c)
			if commit {
				return err
			}
			return nil // commit anyway: a failed CompleteTx wrote nothing
		})
	}
	check := func(what string) {
		n, want := entered.Load(), calls.Load()
		e.expect(n == want, "CompleteTx %s called store.EnterTx %d times in %d calls, want once per call", what, n, want)
	}
	a := e.claim("k", e.tick, store.Won, "first Claim must win")
	e.must(try(a, true), "CompleteTx of the live fence")
	check("of a live claim")
	e.must(try(a, false), "CompleteTx")
	check("of a DONE record")
	z := e.claim("z", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	e.claim("z", long, store.Won, "Claim after lapse must win")
	e.must(try(z, false), "CompleteTx")
	check("by a zombie")
}
