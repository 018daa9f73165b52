package datastorestore

import (
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

// MaxMessagesPerCompleteTx is the most outgoing messages one CompleteTx
// takes: a Datastore commit holds at most 500 entities, one of them the
// record.
const MaxMessagesPerCompleteTx = 499

// CompleteTx records c as done inside tx, the caller's own transaction, so
// that the completion and the caller's business writes commit together or
// not at all. Call it from the function given to RunInTransaction and
// return its error from that function:
//
//	_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
//		if err := st.CompleteTx(tx, c); err != nil {
//			return err // fenced out: the ledger write below never commits
//		}
//		_, err := tx.Put(datastore.IncompleteKey("Ledger", nil), &entry)
//		return err
//	})
//
// CompleteTx first calls [store.EnterTx] with c, then looks the record up
// in tx and applies Complete's rule to it: when the record is CLAIMED with
// c's fence (whether or not its lease has lapsed) it queues the record as
// DONE, with the expiry Complete gives it, and returns nil. Otherwise it
// queues nothing and returns an error matching [store.ErrFenced]: the
// claim was taken over, released, or its record is absent, expired or DONE
// under another fence; or the record is DONE already under c's fence, so
// the work committed once (an earlier run of the transaction whose commit
// reply was lost, say) and this transaction must not commit its effects a
// second time. The caller must then fail its transaction, which rolls back
// its business writes. A claim that is not won is refused with
// [store.ErrNotWon] before anything is read. Any other error comes from the
// lookup, and likewise must fail the transaction.
//
// The record and the business entities must be in the same database, the
// one tx belongs to: tx must come from the client the store was built
// with (or one on the same project and database). A transaction of another
// database reads that database's record of the key, not the store's:
// usually there is none, and CompleteTx reports ErrFenced.
//
// Datastore never lets tx and another writer of the record (a Claim taking
// the key over, say) both commit on the version tx read: one waits for the
// other's lock, or tx's commit fails with
// [datastore.ErrConcurrentTransaction], and RunInTransaction runs the
// function again in a new transaction (three attempts by default). That is
// safe: the retry looks the record up afresh, so a claim taken over in the
// meantime is fenced out on the retry. A commit that landed but whose reply
// was lost is not run again: RunInTransaction's rollback of it fails, and
// it returns the commit's error, so the body fails and the redelivery finds
// the key done.
//
// The gateway still calls Complete after the body returns; on a record
// already DONE with the same fence it answers true and writes nothing.
//
// msgs are outgoing messages, queued in tx after the record (see
// [Store.Outbox]): they commit if and only if the completion does, and a
// relay publishes them afterwards, each with its child key. An invalid
// message fails CompleteTx (see [outbox.Prepare]), before anything is
// read or written, and so do more than MaxMessagesPerCompleteTx
// (Datastore commits at most 500 entities at once, the record and the
// order keys' sequences among them; the body's own writes count too), a
// message whose entity could be over MaxEntityBytes, and messages over
// MaxCommitBytes together. Messages with an ordering key are ordered by
// their key's sequence entity, which CompleteTx reads with the record
// (the same lookup) and writes back: two transactions that commit one
// after the other order their messages so, whatever the clocks of their
// processes say. Completions that enqueue on one ordering key therefore
// contend on its sequence entity, as they would on a record.
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
