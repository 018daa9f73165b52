package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

var _ store.Lister = (*Store)(nil)

// List implements [store.Lister] in key order. The map is not ordered, so
// each page walks every record (one shard locked at a time) and sorts those
// it keeps: O(n log n) for n records, cheap for what a memstore holds. The
// cursor is the last key listed.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListPage, error) {
	o, err := opts.Check()
	if err != nil {
		return store.ListPage{}, err
	}
	after := ""
	if o.Cursor != "" {
		p, err := record.DecodeCursor(o.Cursor, 1)
		if err != nil {
			return store.ListPage{}, fmt.Errorf("memstore: list: %w", err)
		}
		after = p[0]
	}
	if err := ctx.Err(); err != nil {
		return store.ListPage{}, err
	}
	var found []store.Record
	for i := range s.shard {
		sh := &s.shard[i]
		sh.mu.Lock()
		now := s.now()
		for k, e := range sh.m {
			if !strings.HasPrefix(k, o.Prefix) || (o.Cursor != "" && k <= after) {
				continue
			}
			r := e.record()
			if v, ok := s.rules.View(&r, k, now); ok && o.Match(v) {
				found = append(found, v)
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(found, func(a, b store.Record) int { return strings.Compare(a.Key, b.Key) })
	var page store.ListPage
	if len(found) > o.Limit {
		found = found[:o.Limit]
		page.Next = record.EncodeCursor(found[o.Limit-1].Key)
	}
	page.Records = found
	return page, nil
}
