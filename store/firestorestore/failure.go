package firestorestore

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

var _ store.Failer = (*Store)(nil)

// Fail implements [store.Failer] as Complete writes: one conditioned
// update on the version remembered from the caller's Claim, else a read
// first.
func (s *Store) Fail(ctx context.Context, c store.Claim, f store.Failure) (attempts int, failed bool, err error) {
	return s.ops.Fail(ctx, c, f)
}

// Retry implements [store.Failer] as Forget does.
func (s *Store) Retry(ctx context.Context, key string) (bool, error) {
	return s.ops.Retry(ctx, key)
}
