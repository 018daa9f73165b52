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

// round is the record.Round of every operation but Claim. When the store
// remembers the key's live claim (see versions), it writes on that
// version's update time without reading: one RPC. A document changed since
// fails the condition, and the round goes on as readRound.
func (s *Store) round(ctx context.Context, key string, attempt int, decide record.Decide) error {
	if done, err := s.writeRemembered(ctx, key, decide); done {
		return err
	}
	return s.readRound(ctx, key, attempt, decide)
}

// writeRemembered decides and writes on key's remembered version. done is
// false when the round must read: no version, nothing to write, or the
// document changed since.
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

// readRound is the record.Round of a Claim, and the rest of round: one
// read and maybe one write conditioned on it. A Claim never decides on a
// remembered version: another process may have completed the key since,
// and a duplicate must be one read and no write.
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

// stale reports whether a write on a remembered version failed because the
// document changed, or is gone, since.
func stale(err error) bool {
	return conflict(err) || status.Code(err) == codes.NotFound
}

// load returns key's record from the read of ref that gave snap and err:
// nil when absent. A hashed document must hold this very key.
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

// conflict reports whether err is a failed write precondition.
func conflict(err error) bool {
	switch status.Code(err) {
	case codes.AlreadyExists, codes.FailedPrecondition:
		return true
	}
	return false
}

// retryable is record.Ops.Retryable. Retrying is always safe: every round
// re-reads the document, and a Claim whose write landed unseen finds its
// own token.
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
