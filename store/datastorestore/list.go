package datastorestore

import (
	"context"
	"fmt"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

var _ store.Lister = (*Store)(nil)

// List implements [store.Lister] with queries on the kind, filtered and
// ordered by __key__ (the entity name), which Datastore's built-in index
// serves: no composite index is needed, and none of the record's
// properties is indexed. Each query reads the names in the listing's
// prefix range, in batches of Limit+1 (at least 100); state and age are
// filtered here, so every entity read is billed whether it is listed or
// not. Names that are a hash of their key (keys over 1500 bytes, of the
// form __…__, or starting with "sha256:") are read afterwards, all of
// them, and listed by the key their entity holds, after the others. A
// page reads at most 1000 entities, so a page may be short, or empty,
// with a Next cursor. Instants are on this process's clock, as for
// Inspect.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListPage, error) {
	page, err := s.ops.Rules.List(ctx, opts, s.now, hashPrefix, s.scan)
	if err != nil {
		return store.ListPage{}, fmt.Errorf("datastorestore: list: %w", err)
	}
	return page, nil
}

// scan is List's record.Scan: one query by __key__.
func (s *Store) scan(ctx context.Context, from, after string, n int) ([]record.Named, error) {
	q := datastore.NewQuery(s.kind).Namespace(s.namespace).Order("__key__").Limit(n)
	switch {
	case after != "":
		q = q.FilterField("__key__", ">", s.nameKey(after))
	case from != "":
		q = q.FilterField("__key__", ">=", s.nameKey(from))
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

// nameKey is the Datastore key of the entity named name.
func (s *Store) nameKey(name string) *datastore.Key {
	k := datastore.NameKey(s.kind, name, nil)
	k.Namespace = s.namespace
	return k
}
