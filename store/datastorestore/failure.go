package datastorestore

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

var _ store.Failer = (*Store)(nil)

// Fail implements [store.Failer] in one transaction, like Complete.
func (s *Store) Fail(ctx context.Context, c store.Claim, f store.Failure) (attempts int, failed bool, err error) {
	return s.ops.Fail(ctx, c, f)
}

// Retry implements [store.Failer] in one transaction, like Forget.
func (s *Store) Retry(ctx context.Context, key string) (bool, error) {
	return s.ops.Retry(ctx, key)
}
