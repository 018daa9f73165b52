package firestorestore

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

var _ store.Lister = (*Store)(nil)

// List implements [store.Lister] with queries by document ID, which the
// built-in index serves; state and age are filtered here, so every
// document read is billed. Hashed IDs are listed after the others. A page
// reads at most 1000 documents, so it may be short, or empty, with a Next
// cursor. See "Listing" in docs/stores/firestore.md.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListPage, error) {
	page, err := s.ops.Rules.List(ctx, opts, s.now, hashPrefix, s.scan)
	if err != nil {
		return store.ListPage{}, fmt.Errorf("firestorestore: list: %w", err)
	}
	return page, nil
}

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
