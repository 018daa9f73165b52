package firestorestore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// round is the store's record.Round for the operations of a claim's
// holder (Complete, Release, Extend, Fail) and of an operator (Inspect,
// Forget, Retry).
// When the store remembers the key's live claim (see versions), the round
// first decides on that version and, if decide writes, writes on the
// condition that the document's update time is still that one, without
// reading: one RPC. A document changed since then fails the condition, and
// the round goes on as readRound: it reads and decides again.
func (s *Store) round(ctx context.Context, key string, attempt int, decide record.Decide) error {
	if done, err := s.writeRemembered(ctx, key, decide); done {
		return err
	}
	return s.readRound(ctx, key, attempt, decide)
}

// writeRemembered decides on key's remembered version and writes decide's
// record on the condition that the document is still that version. done is
// false when there is no version, decide writes nothing on it, or the
// document changed since: the round must read.
func (s *Store) writeRemembered(ctx context.Context, key string, decide record.Decide) (done bool, err error) {
	v, ok := s.versions.get(key)
	if !ok {
		return false, nil
	}
	next := decide(&v.rec, s.now())
	if next == nil {
		return false, nil // an outcome that writes nothing is read, never remembered
	}
	ref, hashed := s.docRef(key)
	if hashed {
		next.Key = key
	}
	res, err := ref.Update(ctx, updates(next), firestore.LastUpdateTime(v.at))
	switch {
	case err == nil:
		s.versions.put(key, next, res.UpdateTime)
		return true, nil
	case stale(err):
		s.versions.drop(key)
		return false, nil
	}
	s.versions.drop(key) // the write may have landed unseen: the retry reads
	return true, err
}

// readRound is the store's record.Round for a Claim, and the rest of round:
// one read and, when decide wants it, one write on the condition that the
// document is still the one read. A Claim never decides on a remembered
// version: whatever this store last saw of the key, another process may
// have completed it since, and the Claim is then a duplicate, which must
// be one read and no write.
func (s *Store) readRound(ctx context.Context, key string, _ int, decide record.Decide) error {
	ref, hashed := s.docRef(key)
	snap, err := ref.Get(ctx)
	cur, err := load(ref, key, hashed, snap, err)
	if err != nil {
		return err
	}
	next := decide(cur, s.now())
	if next == nil {
		var at time.Time // none: the document does not exist
		if cur != nil {
			at = snap.UpdateTime
		}
		s.versions.seen(key, at)
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
		s.versions.drop(key)
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
		return nil, fmt.Errorf("document %q holds key %s, not this one", ref.ID, store.QuoteKey(r.Key))
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
