// Package memstore is an in-memory [store.Store] for tests, local runs and
// single-process services.
//
// Records live in a sharded map, so claims on different keys rarely contend.
// Expired records are dropped lazily: a shard sweeps itself when it has grown
// to twice its size after the previous sweep, which keeps memory proportional
// to the records that are still alive (roughly message rate × (lease + ttl))
// at an amortised constant cost per insert.
//
// Fences count microseconds on the store's clock (see [store.FenceAt]): a
// record made anew after a sweep dropped its predecessor starts above every
// fence the predecessor handed out, since a record is dropped at least a ttl
// after its last fence was raised.
//
// A memstore is only as durable as its process: records vanish on restart,
// and two processes never see each other's records. Use a shared store for
// anything that runs more than one instance.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/idemgate/idemgate/internal/plant"
	"github.com/idemgate/idemgate/store"
)

// Options configures a Store. The zero value means the defaults.
type Options struct {
	// TTL is how long a completed record suppresses duplicates, and how long
	// a claimed record outlives its lease. A Claim's lease must be shorter
	// (store.ErrLeaseTooLong). Default 1h.
	TTL time.Duration
	// Now is the clock. Default: the wall clock, advanced monotonically
	// from the moment New was called (wall-clock jumps do not move leases).
	Now func() time.Time
}

const (
	defaultTTL = time.Hour
	shardCount = 64 // a power of two
	minSweep   = 1024
)

// Store is an in-memory store. It is safe for concurrent use.
type Store struct {
	ttl   time.Duration
	now   func() time.Time
	seed  maphash.Seed
	shard [shardCount]shard
}

type shard struct {
	mu sync.Mutex // guards the fields below
	m  map[string]record
	// sweepAt is the size at which the next insert sweeps expired records.
	sweepAt int
	_       [40]byte // keep shards on separate cache lines
}

type state uint8

const (
	claimed state = iota + 1
	done
)

type record struct {
	state      state
	fence      int64
	token      string
	fp         string // the payload fingerprint, immutable
	leaseUntil int64  // unix nanoseconds on the store's clock
	expiresAt  int64
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Extender = (*Store)(nil)
)

// New returns an empty Store. A nil opts means the defaults.
func New(opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TTL < 0 {
		return nil, errors.New("memstore: negative TTL")
	}
	if o.TTL == 0 {
		o.TTL = defaultTTL
	}
	if o.Now == nil {
		base := time.Now()
		o.Now = func() time.Time { return base.Add(time.Since(base)) }
	}
	s := &Store{ttl: o.TTL, now: o.Now, seed: maphash.MakeSeed()}
	for i := range s.shard {
		s.shard[i].m = make(map[string]record)
		s.shard[i].sweepAt = minSweep
	}
	return s, nil
}

func (s *Store) shardOf(key string) *shard {
	return &s.shard[maphash.String(s.seed, key)&(shardCount-1)]
}

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration) (store.Claim, error) {
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	if err := store.CheckKey(key); err != nil {
		return store.Claim{}, err
	}
	if lease <= 0 {
		return store.Claim{}, errors.New("memstore: lease must be positive")
	}
	if err := store.CheckLease(lease, s.ttl); err != nil {
		return store.Claim{}, fmt.Errorf("memstore: %w", err)
	}
	fp := store.Fingerprint(ctx)
	if err := store.CheckFingerprint(fp); err != nil {
		return store.Claim{}, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixNano()
	r, ok := sh.m[key]
	switch {
	case !ok || now >= r.expiresAt:
		if !ok {
			sh.maybeSweep(now)
		}
		r.fence = fenceAt(r.fence, now) // r.fence is 0 for a new record
		if plant.On(221) {
			r.fence = 1 // planted: a record made anew restarts its fences
		}
	case r.state == done:
		return store.Claim{Key: key, Status: store.AlreadyDone, Fence: r.fence, Fingerprint: fingerprint(r.fp)}, nil
	case r.token == store.ClaimToken(ctx): // a retried Claim: re-affirm
		return won(key, r), nil
	case now < r.leaseUntil:
		return store.Claim{Key: key, Status: store.HeldByOther, Fence: r.fence, LeaseUntil: time.Unix(0, r.leaseUntil), Fingerprint: fingerprint(r.fp)}, nil
	default: // a lapsed or released claim
		r.fence = fenceAt(r.fence, now)
	}
	r.state = claimed
	r.token = store.ClaimToken(ctx)
	r.fp = string(fp)
	r.leaseUntil = now + int64(lease)
	r.expiresAt = r.leaseUntil + int64(s.ttl)
	sh.m[key] = r
	return won(key, r), nil
}

// fenceAt is store.FenceAt on the store's clock, read as now (unix
// nanoseconds).
func fenceAt(old, now int64) int64 { return store.FenceAt(old, now/1e3) }

// release makes r a released claim at now: its fence rises, its lease ends,
// its token and fingerprint go, and it lives at least a ttl more, so that
// it is dropped no sooner than a ttl after the fence it now holds.
func (s *Store) release(r *record, now int64) {
	r.fence = fenceAt(r.fence, now)
	r.token = "" // a released claim can never be re-affirmed
	r.fp = ""
	r.leaseUntil = now
	r.expiresAt = max(r.expiresAt, now+int64(s.ttl))
}

// owns reports whether c owns r: the same fence, and the same token unless
// r is DONE (then the fence alone names the claim that completed it; fences
// never repeat).
func owns(r record, c store.Claim) bool {
	return r.fence == c.Fence && (r.state == done || r.token == c.Token)
}

func won(key string, r record) store.Claim {
	return store.Claim{Key: key, Status: store.Won, Fence: r.fence, Token: r.token, LeaseUntil: time.Unix(0, r.leaseUntil), Fingerprint: fingerprint(r.fp)}
}

// fingerprint returns a record's fingerprint as a Claim carries it.
func fingerprint(fp string) []byte {
	if fp == "" {
		return nil
	}
	return []byte(fp)
}

// maybeSweep drops expired records once the shard has doubled since the last
// sweep. Called with sh.mu held.
func (sh *shard) maybeSweep(now int64) {
	if len(sh.m) < sh.sweepAt {
		return
	}
	for k, r := range sh.m {
		if now >= r.expiresAt {
			delete(sh.m, k)
		}
	}
	sh.sweepAt = max(2*len(sh.m), minSweep)
}

// Complete implements [store.Store].
func (s *Store) Complete(ctx context.Context, c store.Claim) (bool, error) {
	if err := store.CheckWon(c); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	sh := s.shardOf(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixNano()
	r, ok := sh.m[c.Key]
	if !ok || !owns(r, c) || now >= r.expiresAt {
		return false, nil
	}
	if r.state == claimed {
		r.state = done
		r.expiresAt = now + int64(s.ttl)
		sh.m[c.Key] = r
	}
	return true, nil
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, c store.Claim) error {
	if err := store.CheckWon(c); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sh := s.shardOf(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixNano()
	r, ok := sh.m[c.Key]
	if !ok || r.state != claimed || !owns(r, c) || now >= r.expiresAt {
		return nil
	}
	s.release(&r, now)
	sh.m[c.Key] = r
	return nil
}

// Extend implements [store.Extender].
func (s *Store) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	if err := store.CheckWon(c); err != nil {
		return store.Claim{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	if lease <= 0 {
		return store.Claim{}, errors.New("memstore: lease must be positive")
	}
	sh := s.shardOf(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixNano()
	r, ok := sh.m[c.Key]
	if !ok || r.state != claimed || !owns(r, c) || now >= r.expiresAt {
		return store.Claim{}, store.ErrFenced
	}
	r.leaseUntil = now + int64(lease)
	r.expiresAt = max(r.expiresAt, r.leaseUntil+int64(s.ttl))
	sh.m[c.Key] = r
	return won(c.Key, r), nil
}

// Len returns the number of records held, expired or not. It is meant for
// tests and metrics.
func (s *Store) Len() int {
	n := 0
	for i := range s.shard {
		sh := &s.shard[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
