package firestorestore

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

var _ store.Lister = (*Store)(nil)

// List implements [store.Lister] with queries on the collection, filtered
// and ordered by document ID (__name__), which the built-in index serves:
// no composite index is needed. Each query reads the IDs in the listing's
// prefix range, in batches of Limit+1 (at least 100); state and age are
// filtered here, so every document read is billed whether it is listed or
// not. Documents whose ID is a hash of their key (keys that are no valid
// document ID, such as those with a '/' or over 1500 bytes, and keys
// starting with "sha256:") are read afterwards, all of them, and listed by
// the key they hold, after the others. A page reads at most 1000
// documents, so a page may be short, or empty, with a Next cursor.
// Instants are on this process's clock, as for Inspect.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListPage, error) {
	page, err := s.ops.Rules.List(ctx, opts, s.now, hashPrefix, s.scan)
	if err != nil {
		return store.ListPage{}, fmt.Errorf("firestorestore: list: %w", err)
	}
	return page, nil
}

// scan is List's record.Scan: one query by document ID.
func (s *Store) scan(ctx context.Context, from, after string, n int) ([]record.Named, error) {
	q := s.coll.OrderBy(firestore.DocumentID, firestore.Asc).Limit(n)
	switch {
	case after != "":
		q = q.Where(firestore.DocumentID, ">", s.coll.Doc(after))
	case from != "" && !validID(from):
		return nil, nil // no document ID starts with from (it holds a '/', say)
	case from != "":
		q = q.Where(firestore.DocumentID, ">=", s.coll.Doc(from))
	}
	docs, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, err
	}
	out := make([]record.Named, len(docs))
	for i, d := range docs {
		r, err := parse(d.Data())
		if err != nil {
			return nil, fmt.Errorf("document %q: %w", d.Ref.ID, err)
		}
		out[i] = record.Named{Name: d.Ref.ID, Record: r}
	}
	return out, nil
}
