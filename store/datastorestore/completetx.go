package datastorestore

import (
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

// MaxMessagesPerCompleteTx is the most messages one CompleteTx takes: a
// commit holds at most 500 entities, one of them the record.
const MaxMessagesPerCompleteTx = 499

// CompleteTx records c as done inside tx, the caller's own transaction, so
// that the completion and the caller's writes commit together or not at
// all. Call it in RunInTransaction's function and return its error:
//
//	_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
//		if err := st.CompleteTx(tx, c); err != nil {
//			return err // fenced out: the ledger write below never commits
//		}
//		_, err := tx.Put(datastore.IncompleteKey("Ledger", nil), &entry)
//		return err
//	})
//
// It calls [store.EnterTx] with c and applies Complete's rule to the
// record as tx reads it: CLAIMED with c's fence, it queues it as DONE and
// returns nil; otherwise it returns an error matching [store.ErrFenced]
// and the caller must fail its transaction. A claim not won fails with
// [store.ErrNotWon] before any read. tx must be of the store's database.
//
// msgs are queued in tx for [Store.Outbox] and commit if and only if the
// completion does. An invalid message (see [outbox.Prepare]) or one over
// the limits fails CompleteTx before any read. Completions on one ordering
// key contend on its sequence entity. See "Exactly-once effects: completing
// inside your transaction" in docs/stores/datastore.md.
func (s *Store) CompleteTx(tx *datastore.Transaction, c store.Claim, msgs ...outbox.Message) error {
	if tx == nil {
		return errors.New("datastorestore: CompleteTx: nil transaction")
	}
	if len(msgs) > MaxMessagesPerCompleteTx {
		return fmt.Errorf("datastorestore: CompleteTx: %d messages, more than the %d a commit can hold beside the record", len(msgs), MaxMessagesPerCompleteTx)
	}
	q, err := s.queue(c.Key, msgs)
	if err != nil {
		return err
	}
	var seqs *lookup
	if q != nil && len(q.seqs) > 0 {
		seqs = &lookup{keys: q.seqs, dst: q.seqDst}
	}
	err = s.ops.CompleteTx(c, func(key string, decide record.Decide) error {
		_, err := s.step(tx, key, decide, seqs)
		return err
	})
	if err != nil {
		return err
	}
	return s.enqueueTx(tx, q)
}
