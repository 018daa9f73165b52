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
// CompleteTx calls [store.EnterTx] with c, then applies Complete's rule to
// the record as tx reads it: CLAIMED with c's fence, it queues the record
// as DONE and returns nil. Otherwise it queues nothing and returns an
// error matching [store.ErrFenced] (taken over, released, absent, expired,
// or DONE already: the work committed once), and the caller must fail its
// transaction. A claim that is not won is refused with [store.ErrNotWon]
// before anything is read. Called after a write of tx, it fails with the
// client's "read after write in transaction". tx must belong to the
// store's database.
//
// msgs are written in tx for [Store.Outbox]: they commit if and only if
// the completion does. An invalid message fails CompleteTx before anything
// is read (see [outbox.Prepare]), and so do a document over
// MaxDocumentBytes and messages over MaxCommitBytes together. Messages of
// one ordering key are ordered by the key's sequence document, read with
// the record and written back, so completions on one ordering key contend
// on it. docs/stores/firestore.md covers retries, lost replies and the
// limits.
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
