package datastorestore

import (
	"context"
	"fmt"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

var _ store.Lister = (*Store)(nil)

// List implements [store.Lister] with queries by __key__, which the
// built-in index serves; state and age are filtered here, so every entity
// read is billed. Hashed names are listed after the others. A page reads
// at most 1000 entities, so it may be short, or empty, with a Next cursor.
// See "Listing" in docs/stores/datastore.md.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListPage, error) {
	page, err := s.ops.Rules.List(ctx, opts, s.now, hashPrefix, s.scan)
	if err != nil {
		return store.ListPage{}, fmt.Errorf("datastorestore: list: %w", err)
	}
	return page, nil
}

func (s *Store) scan(ctx context.Context, from, after string, n int) ([]record.Named, error) {
	q := datastore.NewQuery(s.kind).Namespace(s.namespace).Order("__key__").Limit(n)
	switch {
	case after != "":
		q = q.FilterField("__key__", ">", s.nameKey("", after))
	case from != "":
		q = q.FilterField("__key__", ">=", s.nameKey("", from))
	}
	var got []entity
	keys, err := s.client.GetAll(ctx, q, &got)
	if err != nil {
		return nil, err
	}
	out := make([]record.Named, len(keys))
	for i, k := range keys {
		out[i] = record.Named{Name: k.Name, Record: record.Record(got[i])}
	}
	return out, nil
}
