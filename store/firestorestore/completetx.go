package firestorestore

import (
	"errors"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

// CompleteTx records c as done inside tx, the caller's own transaction, so
// that the completion and the caller's business writes commit together or
// not at all. Call it from the function given to RunTransaction, before
// any write of that transaction, and return its error from that function:
//
//	err := client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
//		if err := st.CompleteTx(tx, c); err != nil {
//			return err // fenced out: the ledger write below never commits
//		}
//		return tx.Create(client.Collection("ledger").NewDoc(), entry)
//	})
//
// CompleteTx first calls [store.EnterTx] with c, then reads the record in
// tx and applies Complete's rule to it: when the record is CLAIMED with
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
// read, and likewise must fail the transaction.
//
// A Firestore transaction does all its reads before its writes. CompleteTx
// reads, so it must come before the transaction's first write (Create,
// Set, Update, Delete); called after one, it fails with the client's error
// "firestore: read after write in transaction", and the client refuses to
// commit that transaction even if the error is ignored.
//
// The record and the business documents must be in the same database, the
// one tx belongs to: tx must come from the client the store was built with
// (or one on the same project and database). A transaction of another
// database reads that database's record of the key, not the store's:
// usually there is none, and CompleteTx reports ErrFenced.
//
// Firestore never lets tx and another writer of the record (a Claim taking
// the key over, say) both commit on the version tx read: one waits for the
// other, or tx is aborted and RunTransaction runs the function again in a
// new transaction. That is safe: the retry reads the record afresh, so a
// claim taken over in the meantime is fenced out on the retry.
// RunTransaction retries nothing but Aborted, which applied nothing: a
// commit that landed but whose reply was lost comes back as an error, the
// body fails, and the redelivery finds the key done.
//
// The gateway still calls Complete after the body returns; on a record
// already DONE with the same fence it answers true and writes nothing.
//
// msgs are outgoing messages, written in tx after the record (see
// [Store.Outbox]): they commit if and only if the completion does, and a
// relay publishes them afterwards, each with its child key. An invalid
// message fails CompleteTx (see [outbox.Prepare]) before anything is read
// or written, and so does a message whose document could be over
// MaxDocumentBytes, and messages over MaxCommitBytes together (the body's
// own writes count too). Messages with an ordering key are ordered by
// their key's sequence document, which CompleteTx reads with the record
// (the same request) and writes back: two transactions that commit one
// after the other order their messages so, whatever the clocks of their
// processes say. Completions that enqueue on one ordering key therefore
// contend on its sequence document, as they would on a record.
func (s *Store) CompleteTx(tx *firestore.Transaction, c store.Claim, msgs ...outbox.Message) error {
	if tx == nil {
		return errors.New("firestorestore: CompleteTx: nil transaction")
	}
	q, err := s.queue(c.Key, msgs)
	if err != nil {
		return err
	}
	err = s.ops.CompleteTx(c, func(key string, decide record.Decide) error {
		s.versions.drop(key) // tx may change the document: the next write reads it
		ref, hashed := s.docRef(key)
		var snap *firestore.DocumentSnapshot
		var err error
		if q == nil || len(q.seqs) == 0 {
			snap, err = tx.Get(ref)
		} else {
			// The order keys' sequences are read with the record, in one
			// request, before the transaction writes anything.
			var snaps []*firestore.DocumentSnapshot
			snaps, err = tx.GetAll(append([]*firestore.DocumentRef{ref}, q.seqs...))
			if err == nil {
				err = q.read(snaps[1:])
			}
			if err == nil {
				if snap = snaps[0]; !snap.Exists() {
					err = status.Error(codes.NotFound, "no record")
				}
			}
		}
		cur, err := load(ref, key, hashed, snap, err)
		if err != nil {
			return err
		}
		if next := decide(cur, s.now()); next != nil {
			return tx.Update(ref, updates(next)) // Complete only ever rewrites a record it read
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.enqueueTx(tx, q)
}
