package datastorestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errReadOnly ends a transaction that decided to write nothing: it is
// rolled back instead of committed.
var errReadOnly = errors.New("datastorestore: read-only outcome")

// transact is the Round of the operations that normally write: one
// transaction begun by its lookup. A retry is a readFirst round instead:
// under contention most callers only learn that the key is held or done,
// and a lookup outside any transaction keeps them from aborting the
// holder's writes.
func (s *Store) transact(ctx context.Context, key string, attempt int, decide record.Decide) error {
	if attempt > 1 {
		return s.readFirst(ctx, key, attempt, decide)
	}
	return s.inTx(ctx, key, decide)
}

// readFirst is the Round of Claim and Inspect: a strongly consistent
// lookup outside any transaction, so a duplicate costs one RPC. A new
// record is inserted (AlreadyExists if created since the lookup); a change
// to an existing one runs inTx, which decides on its own lookup.
func (s *Store) readFirst(ctx context.Context, key string, _ int, decide record.Decide) error {
	k, hashed := s.entityKey(key)
	cur, err := s.read(k, key, hashed, func(dst *entity) error { return s.client.Get(ctx, k, dst) })
	if err != nil {
		return err
	}
	next := decide(cur, s.now())
	switch {
	case next == nil:
		return nil
	case cur != nil:
		return s.inTx(ctx, key, decide)
	}
	if hashed {
		next.Key = key
	}
	_, err = s.client.Mutate(ctx, datastore.NewInsert(k, (*entity)(next)))
	if status.Code(err) == codes.Aborted {
		// Contention, as for a transaction's commit.
		return fmt.Errorf("%w: %w", datastore.ErrConcurrentTransaction, err)
	}
	return err
}

// inTx runs one transaction begun by its lookup, and commits decide's
// record or rolls back when it writes nothing.
func (s *Store) inTx(ctx context.Context, key string, decide record.Decide) error {
	committing := false
	_, err := s.client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		wrote, err := s.step(tx, key, decide, nil)
		if err == nil && !wrote {
			return errReadOnly
		}
		committing = wrote
		return err
	}, datastore.BeginLater, datastore.MaxAttempts(1)) // retries are ours, with the same token
	switch {
	case errors.Is(err, errReadOnly):
		return nil
	case err != nil && committing:
		return &commitError{err}
	}
	return err
}

// lookup is what a step reads with the record: keys into dst (a missing
// entity leaves its dst as it was).
type lookup struct {
	keys []*datastore.Key
	dst  []any
}

// step reads key's record (and also) in tx, and queues the write decide
// asks for, reporting whether it did.
func (s *Store) step(tx *datastore.Transaction, key string, decide record.Decide, also *lookup) (wrote bool, err error) {
	k, hashed := s.entityKey(key)
	get := func(dst *entity) error { return tx.Get(k, dst) }
	if also != nil {
		get = func(dst *entity) error {
			err := tx.GetMulti(append([]*datastore.Key{k}, also.keys...), append([]any{dst}, also.dst...))
			var merr datastore.MultiError
			if !errors.As(err, &merr) {
				return err
			}
			for _, e := range merr[1:] {
				if e != nil && !errors.Is(e, datastore.ErrNoSuchEntity) {
					return e
				}
			}
			return merr[0]
		}
	}
	cur, err := s.read(k, key, hashed, get)
	if err != nil {
		return false, err
	}
	next := decide(cur, s.now())
	if next == nil {
		return false, nil
	}
	if hashed {
		next.Key = key
	}
	if _, err := tx.Put(k, (*entity)(next)); err != nil {
		return false, err
	}
	return true, nil
}

// read loads key's record with get: nil when absent. A hashed entity must
// hold this very key.
func (s *Store) read(k *datastore.Key, key string, hashed bool, get func(*entity) error) (*record.Record, error) {
	var got entity
	switch err := get(&got); {
	case err == nil:
		if hashed && got.Key != key {
			return nil, fmt.Errorf("entity %q holds key %s, not this one", k.Name, store.QuoteKey(got.Key))
		}
		r := record.Record(got)
		return &r, nil
	case errors.Is(err, datastore.ErrNoSuchEntity):
		return nil, nil
	default:
		return nil, err
	}
}

// commitError is a failed commit. Whether it was applied may be unknown:
// a commit whose reply was lost and that the transport sent again is
// refused as "transaction has expired or is invalid" (InvalidArgument) even
// though the first copy landed.
type commitError struct{ err error }

func (e *commitError) Error() string { return e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// retryable is record.Ops.Retryable. Retrying is always safe: every
// transaction re-reads the entity, and a Claim whose commit landed unseen
// finds its own token.
func retryable(err error) (retry, now bool) {
	if errors.Is(err, datastore.ErrConcurrentTransaction) {
		return true, false
	}
	switch status.Code(err) {
	case codes.AlreadyExists: // readFirst's insert: the entity was created since the lookup
		return true, true
	case codes.Aborted, codes.Unavailable, codes.DeadlineExceeded, codes.Internal:
		return true, false
	case codes.InvalidArgument: // only for a commit: see commitError
		var ce *commitError
		return errors.As(err, &ce), false
	}
	return false, false
}
