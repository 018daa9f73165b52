package firestorestore

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

var _ store.Inspector = (*Store)(nil)

// Inspect implements [store.Inspector]: one read of the document. Instants
// are on this process's clock (Options.Now), the one the store decides
// with; a record is absent once past expiresAt plus Options.SkewMargin, as
// for every other operation.
func (s *Store) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	return s.ops.Inspect(ctx, key)
}

// Forget implements [store.Inspector] as every operation of this store
// writes: a read (or the version the store remembers), then an update on
// the condition that the document has not changed since (a precondition on
// its update time, which makes the read-modify-write as atomic as a
// transaction would); a conflict reads again.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	return s.ops.Forget(ctx, key)
}
