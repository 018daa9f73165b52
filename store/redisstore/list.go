package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

var _ store.Lister = (*Store)(nil)

// The bounds of one page of List.
const (
	listScanCount = 1000 // SCAN's COUNT hint: buckets visited per call
	listMaxScans  = 64   // SCAN calls per page
	listMaxReads  = 1000 // records read per page
)

// List implements [store.Lister] with SCAN … MATCH on the store's prefix
// and the listing's, on each master in turn, reading each key found as
// [Store.Inspect] does. Redis keeps no order of keys, so a listing walks the
// whole keyspace; a page is in key order within itself only and may be
// short, or empty, with a Next cursor (docs/stores/redis.md, "Listing").
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListPage, error) {
	o, err := opts.Check()
	if err != nil {
		return store.ListPage{}, err
	}
	node, scan, after := 0, uint64(0), ""
	if o.Cursor != "" {
		p, err := record.DecodeCursor(o.Cursor, 3)
		if err == nil {
			node, err = strconv.Atoi(p[0])
		}
		if err == nil {
			scan, err = strconv.ParseUint(p[1], 10, 64)
		}
		if err != nil {
			return store.ListPage{}, fmt.Errorf("redisstore: list: %w", store.ErrInvalidCursor)
		}
		after = p[2]
	}
	if err := ctx.Err(); err != nil {
		return store.ListPage{}, fmt.Errorf("redisstore: list: %w", err)
	}
	nodes, err := s.nodes(ctx)
	if err != nil {
		return store.ListPage{}, fmt.Errorf("redisstore: list: %w", err)
	}
	if node < 0 || node >= len(nodes) {
		return store.ListPage{}, fmt.Errorf("redisstore: list: %w: node %d of %d", store.ErrInvalidCursor, node, len(nodes))
	}
	pattern := s.listPattern(o.Prefix)
	var (
		page  store.ListPage
		seen  = map[string]bool{}
		reads int
	)
	for scans := 0; ; scans++ {
		if scans == listMaxScans || reads >= listMaxReads {
			page.Next = record.EncodeCursor(strconv.Itoa(node), strconv.FormatUint(scan, 10), after)
			return page, nil
		}
		batch, next, err := nodes[node].Scan(ctx, scan, pattern, listScanCount).Result()
		if err != nil {
			return store.ListPage{}, fmt.Errorf("redisstore: list: %w", err)
		}
		slices.Sort(batch)
		for _, rk := range slices.Compact(batch) {
			if rk <= after || seen[rk] {
				continue
			}
			if len(page.Records) == o.Limit || reads == listMaxReads {
				// Stop inside the batch: the next page scans it again
				// and skips what this one listed.
				page.Next = record.EncodeCursor(strconv.Itoa(node), strconv.FormatUint(scan, 10), after)
				return page, nil
			}
			seen[rk], after = true, rk
			key, ok := s.keyOf(rk)
			if !ok || !strings.HasPrefix(key, o.Prefix) {
				continue
			}
			reads++
			r, ok, err := s.Inspect(ctx, key)
			if err != nil {
				return store.ListPage{}, fmt.Errorf("redisstore: list: %w", err)
			}
			if ok && o.Match(r) {
				page.Records = append(page.Records, r)
			}
		}
		scan, after = next, ""
		if scan == 0 {
			if node++; node == len(nodes) {
				return page, nil
			}
		}
	}
}

// nodes returns the clients to SCAN: the masters of a cluster, ordered by
// address, or the store's client.
func (s *Store) nodes(ctx context.Context) ([]redis.Cmdable, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return []redis.Cmdable{s.client}, nil
	}
	var (
		mu      sync.Mutex // guards masters
		masters []*redis.Client
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		masters = append(masters, c)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(masters, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	out := make([]redis.Cmdable, len(masters))
	for i, c := range masters {
		out[i] = c
	}
	return out, nil
}

// listPattern is the MATCH pattern of the Redis keys of the records whose
// key starts with prefix.
func (s *Store) listPattern(prefix string) string {
	p := globEscape(s.prefix)
	if s.hashTag {
		p += "{"
	}
	return p + globEscape(prefix) + "*"
}

// keyOf returns the key whose record is at the Redis key rk, and false
// when rk is no record's key (redisKey's inverse).
func (s *Store) keyOf(rk string) (string, bool) {
	k, ok := strings.CutPrefix(rk, s.prefix)
	if ok && s.hashTag {
		k, ok = strings.CutPrefix(k, "{")
		if ok {
			k, ok = strings.CutSuffix(k, "}")
		}
	}
	return k, ok && k != ""
}

// globEscape escapes the characters that SCAN's MATCH treats as special.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(`*?[]\^-`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
