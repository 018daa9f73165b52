package datastorestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/internal/record"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errReadOnly ends a transaction that decided to write nothing: it is
// rolled back instead of committed.
var errReadOnly = errors.New("datastorestore: read-only outcome")

// transact is the store's record.Round: one transaction, a lookup that
// begins it, then a commit of decide's record, or a rollback when decide
// writes nothing.
func (s *Store) transact(ctx context.Context, key string, decide record.Decide) error {
	k, hashed := s.entityKey(key)
	committing := false
	_, err := s.client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		var (
			cur *record.Record
			got record.Record
		)
		switch err := tx.Get(k, (*entity)(&got)); {
		case err == nil:
			if hashed && got.Key != key {
				return fmt.Errorf("entity %q holds key %s, not this one", k.Name, record.QuoteKey(got.Key))
			}
			cur = &got
		case errors.Is(err, datastore.ErrNoSuchEntity):
		default:
			return err
		}
		next := decide(cur, s.now())
		if next == nil {
			return errReadOnly
		}
		if hashed {
			next.Key = key
		}
		if _, err := tx.Put(k, (*entity)(next)); err != nil {
			return err
		}
		committing = true
		return nil
	}, datastore.BeginLater, datastore.MaxAttempts(1)) // retries are ours, with the same token
	switch {
	case errors.Is(err, errReadOnly):
		return nil
	case err != nil && committing:
		return &commitError{err}
	}
	return err
}

// commitError is a failed commit. Whether it was applied may be unknown:
// a commit whose reply was lost and that the transport sent again is
// refused as "transaction has expired or is invalid" (InvalidArgument) even
// though the first copy landed.
type commitError struct{ err error }

func (e *commitError) Error() string { return e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// retryable reports whether another transaction may succeed where err
// failed (record.Ops.Retry). Retrying is always safe: every transaction
// re-reads the entity, and a Claim whose commit landed unseen finds its own
// token.
func retryable(err error) (retry, now bool) {
	if errors.Is(err, datastore.ErrConcurrentTransaction) {
		return true, false
	}
	switch status.Code(err) {
	case codes.Aborted, codes.Unavailable, codes.DeadlineExceeded, codes.Internal:
		return true, false
	case codes.InvalidArgument: // only for a commit: see commitError
		var ce *commitError
		return errors.As(err, &ce), false
	}
	return false, false
}
