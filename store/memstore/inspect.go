package memstore

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/store"
)

var _ store.Inspector = (*Store)(nil)

// Inspect implements [store.Inspector].
func (s *Store) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	var out store.Record
	ok, err := s.withLive(ctx, key, func(_ *shard, r record, now int64) {
		out = store.Record{
			Key:         key,
			State:       store.Claimed,
			Fence:       r.fence,
			Token:       r.token,
			LeaseUntil:  time.Unix(0, r.leaseUntil),
			ExpiresAt:   time.Unix(0, r.expiresAt),
			ReadAt:      time.Unix(0, now),
			Fingerprint: fingerprint(r.fp),
		}
		if r.state == done {
			out.State, out.Token = store.Done, ""
			out.CompletedAt = time.Unix(0, r.expiresAt-int64(s.ttl))
		}
	})
	return out, ok, err
}

// Forget implements [store.Inspector]: a live record becomes a released
// claim with a higher fence.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	return s.withLive(ctx, key, func(sh *shard, r record, now int64) {
		r.state = claimed
		s.release(&r, now)
		sh.m[key] = r
	})
}

// withLive calls fn with key's shard locked, its live record and the
// clock's reading, and reports whether there was a live record; fn is not
// called when there is none.
func (s *Store) withLive(ctx context.Context, key string, fn func(sh *shard, r record, now int64)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := store.CheckKey(key); err != nil {
		return false, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixNano()
	r, ok := sh.m[key]
	if !ok || now >= r.expiresAt {
		return false, nil
	}
	fn(sh, r, now)
	return true, nil
}
