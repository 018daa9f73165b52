package firestorestore

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

var _ store.Failer = (*Store)(nil)

// Fail implements [store.Failer] as Complete writes: on the version the
// store remembers from the caller's Claim, when it has it, a failure is
// one conditional update and no read; otherwise a read, then the update.
// Neither a released nor a FAILED record is remembered, so the next
// operation on the key reads it.
func (s *Store) Fail(ctx context.Context, c store.Claim, f store.Failure) (attempts int, failed bool, err error) {
	return s.ops.Fail(ctx, c, f)
}

// Retry implements [store.Failer] as Forget does: a read, then an update
// on the condition that the document has not changed since.
func (s *Store) Retry(ctx context.Context, key string) (bool, error) {
	return s.ops.Retry(ctx, key)
}
