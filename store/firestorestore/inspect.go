package firestorestore

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

var _ store.Inspector = (*Store)(nil)

// Inspect implements [store.Inspector]: one read. Instants are on
// Options.Now; a record is absent once past expiresAt plus
// Options.SkewMargin, as for every other operation.
func (s *Store) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	return s.ops.Inspect(ctx, key)
}

// Forget implements [store.Inspector] as every write of this store: a
// read (or the remembered version), then an update conditioned on the
// update time; a conflict reads again.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	return s.ops.Forget(ctx, key)
}
