package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store"
)

var (
	//go:embed inspect.lua
	inspectLua string
	//go:embed forget.lua
	forgetLua string

	inspectScript = redis.NewScript(recordLua + inspectLua)
	forgetScript  = redis.NewScript(recordLua + forgetLua)
)

var _ store.Inspector = (*Store)(nil)

// Inspect implements [store.Inspector] with one script (inspect.lua) that
// reads the record and the server's clock together. A record in its grace
// (past expiresAt, not yet deleted by Redis) is reported as absent, as every
// operation treats it.
func (s *Store) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, false, fmt.Errorf("redisstore: inspect: %w", err)
	}
	reply, err := inspectScript.Run(ctx, s.client, []string{s.redisKey(key)}).StringSlice()
	if err != nil {
		return store.Record{}, false, fmt.Errorf("redisstore: inspect: %w", err)
	}
	r, ok, err := s.parseInspect(key, reply)
	if err != nil {
		return store.Record{}, false, fmt.Errorf("redisstore: inspect: %w", err)
	}
	return r, ok, nil
}

// parseInspect reads inspect.lua's reply.
func (s *Store) parseInspect(key string, reply []string) (store.Record, bool, error) {
	if len(reply) != 1 && len(reply) != 11 {
		return store.Record{}, false, fmt.Errorf("unexpected reply %q", reply)
	}
	var n [6]int64 // now, fence, leaseUntil, expiresAt, attempts, firstFailure
	for i, j := range []int{0, 2, 3, 4, 8, 9} {
		if j >= len(reply) {
			break
		}
		v, err := strconv.ParseInt(reply[j], 10, 64)
		if err != nil {
			return store.Record{}, false, fmt.Errorf("unexpected reply %q", reply)
		}
		n[i] = v
	}
	if len(reply) == 1 {
		return store.Record{}, false, nil
	}
	r := store.Record{
		Key:        key,
		State:      store.Claimed,
		Fence:      n[1],
		Token:      reply[5],
		LeaseUntil: time.UnixMilli(n[2]),
		ExpiresAt:  time.UnixMilli(n[3]),
		Origin:     reply[7],
		Attempts:   int(n[4]),
		Reason:     reply[10],
		ReadAt:     time.UnixMilli(n[0]),
	}
	if reply[6] != "" {
		r.Fingerprint = []byte(reply[6])
	}
	if r.Attempts > 0 {
		r.FirstFailure = time.UnixMilli(n[5])
	}
	switch reply[1] {
	case "C":
		if strings.HasPrefix(r.Token, freeMark) {
			r.Token = "" // the mark of the Forget or Retry that freed it: no holder's
		}
	case "D":
		r.State, r.Token = store.Done, ""
		r.CompletedAt = r.LeaseUntil
	case "F":
		r.State, r.Token = store.Failed, ""
	default:
		return store.Record{}, false, fmt.Errorf("unexpected state %q", reply[1])
	}
	return r, true, nil
}

// Forget implements [store.Inspector] with one script (forget.lua). If
// go-redis retries it after a lost reply, the second run finds the record
// freed under its own mark and reports true, raising nothing.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	return s.free(ctx, "forget", key, "")
}

// freeMark starts the token that forget.lua writes into the record it
// frees, so that the call's retried run knows its own work; Inspect
// reports no token for it.
const freeMark = "free:"

// free runs forget.lua for op (Forget, or Retry with state "F"): it frees
// key's live record when state is empty or the record's state.
func (s *Store) free(ctx context.Context, op, key, state string) (bool, error) {
	if err := store.CheckKey(key); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	n, err := forgetScript.Run(ctx, s.client, []string{s.redisKey(key)}, s.ttl, s.grace, state, freeMark+rand.Text()).Int64()
	if err != nil {
		return false, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return n == 1, nil
}

// Now returns the server's clock (TIME), the one every script decides
// with, to measure its skew against the caller's clock. On a cluster one
// node, chosen by the client, answers; each master decides on its own
// clock for its own slots.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: time: %w", err)
	}
	return t, nil
}

// CheckEviction reads the maxmemory-policy of the server, or of every
// master of a cluster, as New does unless Options.AllowEviction is set, and
// returns an [*EvictionError] for any policy but noeviction. The policy
// may change after New: an operator's check runs this again.
func (s *Store) CheckEviction(ctx context.Context) error {
	return checkEviction(ctx, s.client)
}
