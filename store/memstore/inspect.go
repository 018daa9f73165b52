package memstore

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

var _ store.Inspector = (*Store)(nil)

// Inspect implements [store.Inspector].
func (s *Store) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	sh, err := s.lockKey(ctx, key)
	if err != nil {
		return store.Record{}, false, err
	}
	defer sh.mu.Unlock()
	r, found := sh.read(key)
	out, ok := s.rules.View(orNil(&r, found), key, s.now())
	return out, ok, nil
}

// Forget implements [store.Inspector]: a live record becomes a released
// claim with a higher fence.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	return s.free(ctx, key, s.rules.Forget)
}

// Retry implements [store.Failer]: a live FAILED record becomes a
// released claim with a higher fence and no failures.
func (s *Store) Retry(ctx context.Context, key string) (bool, error) {
	return s.free(ctx, key, s.rules.Retry)
}

// free decides rule (Rules.Forget, Rules.Retry) on key's record under its
// shard's lock, writes what it decides, and reports whether it freed the
// record.
func (s *Store) free(ctx context.Context, key string, rule func(*record.Record, time.Time) (record.Record, bool)) (bool, error) {
	sh, err := s.lockKey(ctx, key)
	if err != nil {
		return false, err
	}
	defer sh.mu.Unlock()
	r, found := sh.read(key)
	next, write := rule(orNil(&r, found), s.now())
	if write {
		sh.m[key] = entryOf(&next)
	}
	return write, nil
}

// lockKey checks ctx and key and returns key's shard locked.
func (s *Store) lockKey(ctx context.Context, key string) (*shard, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	return sh, nil
}
