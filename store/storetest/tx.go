package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/idemgate/idemgate/store"
)

// txCases run when Config.InTx is set: completion inside the caller's
// transaction commits or rolls back with it, and is fenced like Complete.
var txCases = []testCase{
	{"TxCompleteCommits", longTTL, old(txCompleteCommits)},
	{"TxCompleteRollsBack", longTTL, old(txCompleteRollsBack)},
	{"TxCompleteFenced", longTTL, old(txCompleteFenced)},
	{"TxCompleteTwice", longTTL, old(txCompleteTwice)},
	{"TxCompleteEntersTx", longTTL, old(txCompleteEntersTx)},
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
func txConfigured(e *env) error {
	if e.cfg.InTx == nil && reflect.ValueOf(e.s).MethodByName("CompleteTx").IsValid() {
		return violated("%T has a CompleteTx method but Config.InTx is nil: set it so that the suite runs the transactional cases", e.s)
	}
	return nil
}

var errRollback = errors.New("storetest: the caller's transaction fails after CompleteTx")

// inTx runs fn in a transaction of the store's database.
func (e *env) inTx(fn func(complete func(store.Claim) error) error) error {
	return e.cfg.InTx(e.ctx, e.s, fn)
}

// txComplete completes c in a transaction that commits, and fails unless
// that succeeds.
func (e *env) txComplete(c store.Claim, rule string) error {
	if err := e.inTx(func(complete func(store.Claim) error) error { return complete(c) }); err != nil {
		return fmt.Errorf("%s: CompleteTx in a committed transaction: %w", rule, err)
	}
	return nil
}

func txCompleteCommits(e *env) error {
	a, err := e.claimE("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick) // lapsed, but nobody reclaimed: no lease check, as Complete
	if err := e.txComplete(a, "CompleteTx of the live fence must commit"); err != nil {
		return err
	}
	d, err := e.claimE("k", long, store.AlreadyDone, "a committed CompleteTx must leave the key DONE")
	if err != nil {
		return err
	}
	if err := fenceIsE(d, a.Fence, "a committed CompleteTx must keep the claim's fence"); err != nil {
		return err
	}
	return e.completeE(a, true, "Complete after a committed CompleteTx with the same fence must answer true (the gateway's own Complete)")
}

func txCompleteRollsBack(e *env) error {
	for _, then := range []string{"complete", "release"} {
		key := "k-" + then
		a, err := e.claimE(key, long, store.Won, "first Claim must win")
		if err != nil {
			return err
		}
		err = e.inTx(func(complete func(store.Claim) error) error {
			if err := complete(a); err != nil {
				return fmt.Errorf("CompleteTx of the live fence: %w", err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			return violated("a transaction whose body fails after CompleteTx returned %v, want the body's error", err)
		}
		if _, err := e.claimE(key, long, store.HeldByOther, "a rolled-back CompleteTx must leave the key CLAIMED"); err != nil {
			return err
		}
		if then == "complete" {
			if err := e.completeE(a, true, "the claim must still Complete after its CompleteTx rolled back"); err != nil {
				return err
			}
			if _, err := e.claimE(key, long, store.AlreadyDone, "Complete after a rollback must leave the key DONE"); err != nil {
				return err
			}
			continue
		}
		if err := e.releaseE(a, "the claim must still Release after its CompleteTx rolled back"); err != nil {
			return err
		}
		b, err := e.claimE(key, long, store.Won, "Release after a rollback must free the key")
		if err != nil {
			return err
		}
		if b.Fence <= a.Fence {
			return violated("Claim after a rollback and a Release: fence %d, want above %d", b.Fence, a.Fence)
		}
	}
	return nil
}

func txCompleteFenced(e *env) error {
	fenced := func(c store.Claim, rule string) error {
		var inner error
		err := e.inTx(func(complete func(store.Claim) error) error {
			inner = complete(c)
			return nil // commit anyway: a fenced CompleteTx must have written nothing
		})
		if err != nil {
			return fmt.Errorf("%s: committing after a fenced CompleteTx: %w", rule, err)
		}
		if !errors.Is(inner, store.ErrFenced) {
			return violated("%s: CompleteTx = %v, want an error matching store.ErrFenced", rule, inner)
		}
		return nil
	}
	if err := fenced(store.Claim{Key: "absent", Status: store.Won, Fence: 1, Token: "t"}, "CompleteTx of an absent record"); err != nil {
		return err
	}
	if _, err := e.claimE("absent", long, store.Won, "a fenced CompleteTx must not create the record"); err != nil {
		return err
	}

	zombie, err := e.claimE("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick)
	b, err := e.claimE("k", long, store.Won, "Claim after lapse must win")
	if err != nil {
		return err
	}
	if err := fenced(zombie, "CompleteTx by a zombie after a reclaim"); err != nil {
		return err
	}
	if _, err := e.claimE("k", long, store.HeldByOther, "a zombie's CompleteTx must leave its successor holding the key"); err != nil {
		return err
	}
	if err := e.txComplete(b, "the successor's CompleteTx must commit after the zombie's"); err != nil {
		return err
	}
	if err := fenced(zombie, "CompleteTx by a zombie on its successor's DONE record"); err != nil {
		return err
	}

	r, err := e.claimE("r", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.releaseE(r, "Release of a live claim"); err != nil {
		return err
	}
	if err := fenced(r, "CompleteTx of a released claim"); err != nil {
		return err
	}
	_, err = e.claimE("r", long, store.Won, "a released key must stay free after a fenced CompleteTx")
	return err
}

// txCompleteTwice is a business transaction run again after its first
// commit landed (its reply lost, say): the second CompleteTx of the claim
// meets the DONE record its own first commit made, and must fail the
// transaction with ErrFenced, or the work would commit twice. The gateway's
// own Complete still answers true.
func txCompleteTwice(e *env) error {
	a, err := e.claimE("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.txComplete(a, "CompleteTx of the live fence must commit"); err != nil {
		return err
	}
	x, err := inspector(e)
	if err != nil {
		return err
	}
	before, err := e.inspect(x, "k", true, "the record after a committed CompleteTx")
	if err != nil {
		return err
	}
	var inner error
	err = e.inTx(func(complete func(store.Claim) error) error {
		inner = complete(a)
		return inner
	})
	if !errors.Is(inner, store.ErrFenced) {
		return violated("CompleteTx again on the DONE record of its own fence = %v, want an error matching store.ErrFenced: a transaction run again must not commit its effects twice", inner)
	}
	if !errors.Is(err, store.ErrFenced) {
		return violated("a transaction failed by its CompleteTx on a DONE record returned %v, want the CompleteTx's error", err)
	}
	after, err := e.inspect(x, "k", true, "the record after a refused second CompleteTx")
	if err != nil {
		return err
	}
	if !sameRecord(before, after) {
		return violated("a refused second CompleteTx changed the record from %+v to %+v", before, after)
	}
	if err := e.completeE(a, true, "Complete after a refused second CompleteTx must still answer true (the gateway's own Complete)"); err != nil {
		return err
	}
	d, err := e.claimE("k", long, store.AlreadyDone, "the key must stay DONE")
	if err != nil {
		return err
	}
	return fenceIsE(d, a.Fence, "the key must stay DONE under the claim's fence")
}

// txCompleteEntersTx checks that every CompleteTx calls store.EnterTx with
// its claim, whatever the record turns out to be: it must do so before it
// reads the record, so that the gateway stops renewing a lease whose record
// the transaction is about to lock.
func txCompleteEntersTx(e *env) error {
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
	check := func(what string) error {
		if n, want := entered.Load(), calls.Load(); n != want {
			return violated("CompleteTx %s called store.EnterTx %d times in %d calls, want once per call", what, n, want)
		}
		return nil
	}
	a, err := e.claimE("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := try(a, true); err != nil {
		return fmt.Errorf("CompleteTx of the live fence: %w", err)
	}
	if err := check("of a live claim"); err != nil {
		return err
	}
	if err := try(a, false); err != nil {
		return err
	}
	if err := check("of a DONE record"); err != nil {
		return err
	}
	z, err := e.claimE("z", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick)
	if _, err := e.claimE("z", long, store.Won, "Claim after lapse must win"); err != nil {
		return err
	}
	if err := try(z, false); err != nil {
		return err
	}
	return check("by a zombie")
}
