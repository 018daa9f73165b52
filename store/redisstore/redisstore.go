package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store"
)

// Options configures a Store. The zero value means the defaults.
type Options struct {
	// Prefix is prepended to every key to form the Redis key of its record,
	// so that idemgate shares a database with other data. Default "idemgate:".
	// A "{…}" hash tag inside Prefix pins every record to one Cluster slot,
	// which is rarely what you want.
	Prefix string

	// HashTag wraps the caller's key in braces after the prefix
	// ("idemgate:{order-42}"), so that on Redis Cluster the record shares the
	// slot of your own keys with the same tag. The store never needs it. With
	// HashTag, Prefix must not contain '{'. Default false.
	HashTag bool

	// TTL is how long a completed record suppresses duplicates, and how long
	// a claimed record outlives its lease. A Claim's lease must be shorter
	// (store.ErrLeaseTooLong). Default 1h; rounded up to a whole
	// millisecond.
	TTL time.Duration

	// Grace is how long Redis keeps a record after its expiresAt before it
	// deletes it; a Claim during the grace continues its fence, a margin for a
	// server clock that steps back (fences never repeat without it either).
	// Default: TTL. A negative Grace means none, which halves the memory held
	// by completed records.
	Grace time.Duration

	// AllowEviction accepts a Redis whose maxmemory-policy may evict records,
	// and skips New's check. It costs the guarantee: an evicted record lets the
	// work run again, or a second holder in while the first still works.
	// Default false: New refuses every policy but noeviction.
	AllowEviction bool
}

const (
	defaultPrefix = "idemgate:"
	defaultTTL    = time.Hour
)

// Store is a [store.Store], [store.Extender] and [store.Failer] backed by
// Redis. It is safe for concurrent use.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	hashTag bool
	ttl     int64 // milliseconds
	ttlDur  time.Duration
	grace   int64 // milliseconds
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Extender = (*Store)(nil)
)

// New returns a Store that keeps its records through client: a
// *redis.Client, a Sentinel failover client or a *redis.ClusterClient. A
// *redis.Ring is refused, since it moves keys between shards. A nil opts
// means the defaults.
//
// Unless [Options.AllowEviction] is set, New reads the maxmemory-policy of
// the server, or of every master of a cluster, with INFO memory, and
// refuses any policy but noeviction with an [*EvictionError]; a server that
// cannot answer fails New too. The check sees the policy at construction
// only. The client is the caller's to close.
func New(ctx context.Context, client redis.UniversalClient, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if _, ok := client.(*redis.Ring); ok {
		return nil, errRing
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = defaultPrefix
	}
	if o.HashTag && strings.Contains(o.Prefix, "{") {
		return nil, fmt.Errorf("redisstore: Prefix %q contains '{', which would override the HashTag", o.Prefix)
	}
	switch {
	case o.TTL < 0:
		return nil, fmt.Errorf("redisstore: negative TTL %v", o.TTL)
	case o.TTL == 0:
		o.TTL = defaultTTL
	}
	switch {
	case o.Grace < 0:
		o.Grace = 0
	case o.Grace == 0:
		o.Grace = o.TTL
	}
	if !o.AllowEviction {
		if err := checkEviction(ctx, client); err != nil {
			return nil, err
		}
	}
	return &Store{
		client:  client,
		prefix:  o.Prefix,
		hashTag: o.HashTag,
		ttl:     ceilMillis(o.TTL),
		ttlDur:  o.TTL,
		grace:   ceilMillis(o.Grace),
	}, nil
}

// ceilMillis converts d to whole milliseconds, rounding up.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// leaseMillis checks a lease and converts it to whole milliseconds, rounding
// up so that a holder never gets less than it asked for.
func leaseMillis(lease time.Duration) (int64, error) {
	if lease < time.Millisecond {
		return 0, fmt.Errorf("redisstore: lease %v is shorter than the store's 1ms resolution", lease)
	}
	return ceilMillis(lease), nil
}

// redisKey is the Redis key of key's record.
func (s *Store) redisKey(key string) string {
	if s.hashTag {
		return s.prefix + "{" + key + "}"
	}
	return s.prefix + key
}

// Claim implements [store.Store]. The server's clock decides whether a lease
// or a record has lapsed; one EVALSHA runs the whole decision, and carries
// the fingerprint to keep, if any.
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Claim{}, err
	}
	ms, err := leaseMillis(lease)
	if err != nil {
		return store.Claim{}, err
	}
	if err := store.CheckLease(lease, s.ttlDur); err != nil {
		return store.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	opts, err = opts.Checked()
	if err != nil {
		return store.Claim{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	token := opts.ClaimToken()
	r, err := claimScript.Run(ctx, s.client, []string{s.redisKey(key)}, ms, s.ttl, s.grace, token, opts.Fingerprint, opts.Origin).Slice()
	if err != nil {
		return store.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	c, ok := claimReply(key, r)
	if !ok {
		return store.Claim{}, fmt.Errorf("redisstore: claim: unexpected reply %v", r)
	}
	if c.Status == store.Won {
		c.Token = token
	}
	return c, nil
}

// claimReply reads claim.lua's reply: the status, the fence, the lease's
// end when the record is claimed, the count and the reason when it
// failed, and the kept fingerprint and origin ("" for none).
func claimReply(key string, r []any) (store.Claim, bool) {
	n := len(r)
	if n < 4 {
		return store.Claim{}, false
	}
	status, ok1 := r[0].(int64)
	fence, ok2 := r[1].(int64)
	fp, ok3 := r[n-2].(string)
	origin, ok4 := r[n-1].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return store.Claim{}, false
	}
	c := store.Claim{Key: key, Fence: fence, Origin: origin}
	if fp != "" {
		c.Fingerprint = []byte(fp)
	}
	switch {
	case status == replyDone && n == 4:
		c.Status = store.AlreadyDone
		return c, true
	case status == replyWon && n == 5:
		c.Status = store.Won
	case status == replyHeld && n == 5:
		c.Status = store.HeldByOther
	case status == replyFailed && n == 6:
		attempts, ok1 := r[2].(int64)
		reason, ok2 := r[3].(string)
		c.Status, c.Attempts, c.Reason = store.AlreadyFailed, int(attempts), reason
		return c, ok1 && ok2
	default:
		return store.Claim{}, false
	}
	until, ok := r[2].(int64)
	c.LeaseUntil = time.UnixMilli(until)
	return c, ok
}

// The first element of claim.lua's reply.
const (
	replyWon    = 1
	replyDone   = 2
	replyHeld   = 3
	replyFailed = 4
)

// Complete implements [store.Store].
func (s *Store) Complete(ctx context.Context, c store.Claim) (bool, error) {
	if err := store.CheckWon(c); err != nil {
		return false, fmt.Errorf("redisstore: complete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("redisstore: complete: %w", err)
	}
	n, err := completeScript.Run(ctx, s.client, []string{s.redisKey(c.Key)}, fence(c), s.ttl, s.grace, c.Token).Int64()
	if err != nil {
		return false, fmt.Errorf("redisstore: complete: %w", err)
	}
	return n == 1, nil
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, c store.Claim) error {
	if err := store.CheckWon(c); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	if err := releaseScript.Run(ctx, s.client, []string{s.redisKey(c.Key)}, fence(c), c.Token, s.ttl, s.grace).Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return nil
}

// Extend implements [store.Extender].
func (s *Store) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	if err := store.CheckWon(c); err != nil {
		return store.Claim{}, fmt.Errorf("redisstore: extend: %w", err)
	}
	ms, err := leaseMillis(lease)
	if err != nil {
		return store.Claim{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("redisstore: extend: %w", err)
	}
	until, err := extendScript.Run(ctx, s.client, []string{s.redisKey(c.Key)}, fence(c), ms, s.ttl, s.grace, c.Token).Int64()
	if err != nil {
		return store.Claim{}, fmt.Errorf("redisstore: extend: %w", err)
	}
	if until == 0 {
		return store.Claim{}, store.ErrFenced
	}
	// The fingerprint is c's: only a Claim that raises the fence writes one.
	return store.Claim{Key: c.Key, Status: store.Won, Fence: c.Fence, Token: c.Token, LeaseUntil: time.UnixMilli(until), Fingerprint: c.Fingerprint, Origin: c.Origin}, nil
}

// fence is c's fence as the scripts compare it: the decimal digits the
// record holds, so that the comparison is exact for every int64.
func fence(c store.Claim) string {
	return strconv.FormatInt(c.Fence, 10)
}
