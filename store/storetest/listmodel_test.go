package storetest

import (
	"context"
	"slices"
	"strings"

	"github.com/idemgate/idemgate/store"
)

// List implements store.Lister on the model, in key order; the cursor is
// the last key listed.
func (s *model) List(ctx context.Context, opts store.ListOptions) (store.ListPage, error) {
	o, err := opts.Check()
	if err != nil {
		return store.ListPage{}, err
	}
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return store.ListPage{}, err
	}
	if o.Cursor != "" && !strings.HasPrefix(o.Cursor, "k:") {
		return store.ListPage{}, store.ErrInvalidCursor
	}
	after := strings.TrimPrefix(o.Cursor, "k:")
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var keys []string
	for k, r := range s.m {
		match := strings.HasPrefix(k, o.Prefix) || (s.bugs.listContains && strings.Contains(k, o.Prefix))
		live := now.Before(r.expiry) || s.bugs.listShowsExpired
		if match && live && (o.Cursor == "" || k > after) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page store.ListPage
	for _, k := range keys {
		if len(page.Records) == o.Limit {
			last := page.Records[len(page.Records)-1].Key
			if s.bugs.listRepeats && len(page.Records) > 1 {
				last = page.Records[len(page.Records)-2].Key
			}
			page.Next = "k:" + last
			break
		}
		r := s.m[k]
		out := s.view(k, r, now)
		// The listing's own options filter state and age; the bugs above
		// are in what reaches them.
		o.Prefix = ""
		if o.Match(out) {
			page.Records = append(page.Records, out)
		}
	}
	return page, nil
}
