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
// CompleteTx calls [store.EnterTx] with c, then applies Complete's rule to
// the record as tx reads it: CLAIMED with c's fence, it queues the record
// as DONE and returns nil. Otherwise it queues nothing and returns an
// error matching [store.ErrFenced] (taken over, released, absent, expired,
// or DONE already: the work committed once), and the caller must fail its
// transaction. A claim that is not won is refused with [store.ErrNotWon]
// before anything is read. tx must belong to the store's database.
//
// msgs are queued in tx for [Store.Outbox]: they commit if and only if the
// completion does. An invalid message fails CompleteTx before anything is
// read (see [outbox.Prepare]), and so do more than
// MaxMessagesPerCompleteTx, an entity over MaxEntityBytes and messages
// over MaxCommitBytes together. Messages of one ordering key are ordered
// by the key's sequence entity, read with the record and written back, so
// completions on one ordering key contend on it. docs/stores/datastore.md
// covers retries, lost replies and the limits.
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
