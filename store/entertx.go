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
// transaction of the caller's, which from here on decides whether c's work
// commits; a store's CompleteTx calls it before it touches c's record. The
// gateway then stops renewing c and no longer cancels the body for its
// lease (docs/design.md, "Lease renewal"), so a body whose transaction rolls
// back should return an error at once. A claim without a watcher is unaffected.
func EnterTx(c Claim) {
	if c.watcher != nil {
		c.watcher.EnteredTx()
	}
}
