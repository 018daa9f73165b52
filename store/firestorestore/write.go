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
//
// When the store remembers the key's document at some update time (see
// versions), the round first decides on that version and, if decide
// writes, writes on the condition that the document's update time is still
// that one, without reading: one RPC. A document changed since then fails
// the condition, and the round goes on to read it and decide again.
func (s *Store) round(ctx context.Context, key string, _ int, decide record.Decide) error {
	ref, hashed := s.docRef(key)
	if v, ok := s.versions.take(key); ok {
		if next := decide(&v.rec, s.now()); next != nil {
			if hashed {
				next.Key = key
			}
			res, err := ref.Update(ctx, updates(next), firestore.LastUpdateTime(v.at))
			switch {
			case err == nil:
				s.versions.put(key, next, res.UpdateTime)
				return nil
			case !stale(err):
				return err // the retry reads: the version is forgotten
			}
		}
	}
	snap, err := ref.Get(ctx)
	cur, err := load(ref, key, hashed, snap, err)
	if err != nil {
		return err
	}
	next := decide(cur, s.now())
	if next == nil {
		if cur != nil {
			s.versions.put(key, cur, snap.UpdateTime)
		}
		return nil
	}
	if hashed {
		next.Key = key
	}
	var res *firestore.WriteResult
	if cur == nil {
		res, err = ref.Create(ctx, fields(next))
	} else {
		res, err = ref.Update(ctx, updates(next), firestore.LastUpdateTime(snap.UpdateTime))
	}
	if err != nil {
		return err
	}
	s.versions.put(key, next, res.UpdateTime)
	return nil
}

// stale reports whether err is the failed condition of a write on a
// remembered version: the document changed, or is gone, since.
func stale(err error) bool {
	return conflict(err) || status.Code(err) == codes.NotFound
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
