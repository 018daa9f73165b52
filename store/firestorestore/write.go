package firestorestore

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// round is the store's record.Round: one read and, when decide wants it,
// one write on the condition that the document is still the one read.
func (s *Store) round(ctx context.Context, key string, _ int, decide record.Decide) error {
	ref, hashed := s.docRef(key)
	snap, err := ref.Get(ctx)
	cur, err := load(ref, key, hashed, snap, err)
	if err != nil {
		return err
	}
	next := decide(cur, s.now())
	if next == nil {
		return nil
	}
	if hashed {
		next.Key = key
	}
	if cur == nil {
		_, err = ref.Create(ctx, fields(next))
	} else {
		_, err = ref.Update(ctx, updates(next), firestore.LastUpdateTime(snap.UpdateTime))
	}
	return err
}

// load returns key's record from the read of its document ref that gave
// snap and err: nil when the document does not exist. A hashed document ID
// must hold this very key.
func load(ref *firestore.DocumentRef, key string, hashed bool, snap *firestore.DocumentSnapshot, err error) (*record.Record, error) {
	switch {
	case status.Code(err) == codes.NotFound:
		return nil, nil
	case err != nil:
		return nil, err
	}
	r, err := parse(snap.Data())
	if err != nil {
		return nil, fmt.Errorf("document %q: %w", ref.ID, err)
	}
	if hashed && r.Key != key {
		return nil, fmt.Errorf("document %q holds key %s, not this one", ref.ID, record.QuoteKey(r.Key))
	}
	return &r, nil
}

// conflict reports whether err is a failed write precondition: the
// document was created, or changed, after it was read.
func conflict(err error) bool {
	switch status.Code(err) {
	case codes.AlreadyExists, codes.FailedPrecondition:
		return true
	}
	return false
}

// retryable reports whether another round may succeed where err failed.
// Retrying is always safe: every round re-reads the document, and a Claim
// whose write landed unseen finds its own token.
func retryable(err error) (retry, now bool) {
	if conflict(err) {
		return true, true // the document moved on: decide again at once
	}
	switch status.Code(err) {
	case codes.Aborted, codes.Unavailable, codes.DeadlineExceeded, codes.Internal:
		return true, false
	}
	return false, false
}
