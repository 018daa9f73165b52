package redisstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store"
)

var (
	//go:embed fail.lua
	failLua string

	failScript = redis.NewScript(recordLua + failLua)
)

var _ store.Failer = (*Store)(nil)

// Fail implements [store.Failer] with one script (fail.lua), which counts
// the failure and decides on the server's clock whether the record goes
// FAILED. If go-redis retries it after a lost reply, a Fail that made the
// record FAILED answers again as it did; one that only counted finds its
// claim released, and answers 0 and false, as for a claim fenced out: the
// key is free for the next delivery either way.
func (s *Store) Fail(ctx context.Context, c store.Claim, f store.Failure) (int, bool, error) {
	if err := store.CheckWon(c); err != nil {
		return 0, false, fmt.Errorf("redisstore: fail: %w", err)
	}
	if err := store.CheckReason(f.Reason); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("redisstore: fail: %w", err)
	}
	final := 0
	if f.Final {
		final = 1
	}
	r, err := failScript.Run(ctx, s.client, []string{s.redisKey(c.Key)}, fence(c), c.Token, s.ttl, s.grace, f.Reason, final, f.MaxAttempts).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("redisstore: fail: %w", err)
	}
	if len(r) != 2 {
		return 0, false, fmt.Errorf("redisstore: fail: unexpected reply %v", r)
	}
	return int(r[0]), r[1] == 1, nil
}

// Retry implements [store.Failer] with forget.lua, told to free a FAILED
// record only. If go-redis retries it after a lost reply, the second run
// finds the record freed under its own token and Retry reports true.
func (s *Store) Retry(ctx context.Context, key string) (bool, error) {
	return s.free(ctx, "retry", key, "F")
}
