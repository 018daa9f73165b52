package datastorestore

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

var _ store.Inspector = (*Store)(nil)

// Inspect implements [store.Inspector]: one lookup outside any
// transaction. Instants are on Options.Now; a record is absent once past
// expiresAt plus Options.SkewMargin, as for every other operation.
func (s *Store) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	return s.readOps.Inspect(ctx, key)
}

// Forget implements [store.Inspector] in one transaction, like Release.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	return s.ops.Forget(ctx, key)
}
