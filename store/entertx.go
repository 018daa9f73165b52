package store

// TxWatcher is told when a claim it holds is handed to a transaction (see
// [OnEnterTx]).
type TxWatcher interface {
	// EnteredTx is called by [EnterTx], before the transaction reads or
	// writes the claim's record.
	EnteredTx()
}

// TxWatcherFunc makes a function a [TxWatcher].
type TxWatcherFunc func()

// EnteredTx calls f.
func (f TxWatcherFunc) EnteredTx() { f() }

// OnEnterTx returns c carrying w, which [EnterTx] tells. The gateway gives
// the claims it renews such a watcher (the claim in the body's context),
// so that it learns when the body hands the claim to a transaction.
func OnEnterTx(c Claim, w TxWatcher) Claim {
	c.watcher = w
	return c
}

// EnterTx tells whoever holds c that c is being completed inside a
// transaction of the caller's: from here on that transaction decides
// whether c's work commits. A store's CompleteTx calls it before it reads
// or writes c's record.
//
// The gateway then stops renewing c's lease and no longer cancels the body
// when the lease ends: a renewal would queue behind the transaction's lock
// on the record (SQL) or abort the transaction (Datastore, Firestore), and
// the transaction needs no lease to stay safe. While it holds the record's
// lock nobody can take the key over, and a takeover that gets in first
// makes its fence check fail, or its commit abort, so a holder that lost
// its key commits nothing. A body whose transaction rolls back should
// return an error at once: the lease that guarded the rest of its work is
// no longer renewed.
//
// A claim without a watcher (not from the gateway, or from a gateway whose
// store does not renew) is unaffected.
func EnterTx(c Claim) {
	if c.watcher != nil {
		c.watcher.EnteredTx()
	}
}
