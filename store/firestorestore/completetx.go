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
// that the completion and the caller's writes commit together or not at
// all. Call it in RunTransaction's function before any write, and return
// its error:
//
//	err := client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
//		if err := st.CompleteTx(tx, c); err != nil {
//			return err // fenced out: the ledger write below never commits
//		}
//		return tx.Create(client.Collection("ledger").NewDoc(), entry)
//	})
//
// It calls [store.EnterTx] with c and applies Complete's rule to the
// record as tx reads it: CLAIMED with c's fence, it queues it as DONE and
// returns nil; otherwise it returns an error matching [store.ErrFenced]
// and the caller must fail its transaction. A claim not won fails with
// [store.ErrNotWon] before any read; after a write of tx, with the
// client's "read after write in transaction". tx must be of the store's
// database.
//
// msgs are written in tx for [Store.Outbox] and commit if and only if the
// completion does. An invalid message (see [outbox.Prepare]) or one over
// the limits fails CompleteTx before any read. Completions on one ordering
// key contend on its sequence document. See "Exactly-once effects: completing
// inside your transaction" in docs/stores/firestore.md.
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
			// The sequences are read with the record, before any write.
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
