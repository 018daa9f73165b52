// Package memstore is an in-memory [store.Store] for tests, local runs and
// single-process services. It runs the transition functions of the Google
// stores (store/internal/record) under a sharded lock, on one clock, so
// every test on memstore exercises the rules those stores decide by.
// Expired records are swept lazily, at an amortised constant cost per
// insert. Records vanish with the process and are never shared between
// processes: use a shared store for anything that runs more than one
// instance. docs/stores/README.md ("memstore") has the details.
package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
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
	rules record.Rules // the store's ttl; no skew, one clock decides; times to the nanosecond
	now   func() time.Time
	seed  maphash.Seed
	shard [shardCount]shard
}

type shard struct {
	mu sync.Mutex // guards the fields below
	m  map[string]entry
	// sweepAt is the size at which the next insert sweeps expired records.
	sweepAt int
	_       [40]byte // keep shards on separate cache lines
}

// entry is a record as a shard keeps it: smaller than a record.Record,
// which it is turned into for each decision and back.
type entry struct {
	state      string // record.StateClaimed, StateDone or StateFailed
	fence      int64
	token      string
	fp         []byte // the payload fingerprint; never written into, so that a decision can share it
	origin     string // the delivery that won the record
	leaseUntil int64  // unix nanoseconds on the store's clock
	expiresAt  int64
	fail       *failures // nil when no attempt failed
}

// failures are what an entry keeps of its failed attempts (store.Failer):
// few records have any, so they cost the others one pointer.
type failures struct {
	attempts int
	reason   string
	first    time.Time
}

// record returns e as the rules read it.
func (e *entry) record() record.Record {
	r := record.Record{State: e.state, Fence: e.fence, Token: e.token, LeaseUntil: time.Unix(0, e.leaseUntil), ExpiresAt: time.Unix(0, e.expiresAt), Fingerprint: e.fp, Origin: e.origin}
	if f := e.fail; f != nil {
		r.Attempts, r.Reason, r.FirstFailure = f.attempts, f.reason, f.first
	}
	return r
}

// entryOf returns the entry that keeps r.
func entryOf(r *record.Record) entry {
	e := entry{state: r.State, fence: r.Fence, token: r.Token, fp: r.Fingerprint, origin: r.Origin, leaseUntil: r.LeaseUntil.UnixNano(), expiresAt: r.ExpiresAt.UnixNano()}
	if r.Attempts > 0 {
		e.fail = &failures{attempts: r.Attempts, reason: r.Reason, first: r.FirstFailure}
	}
	return e
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Extender = (*Store)(nil)
	_ store.Failer   = (*Store)(nil)
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
	s := &Store{rules: record.Rules{TTL: o.TTL, Exact: true}, now: o.Now, seed: maphash.MakeSeed()}
	for i := range s.shard {
		s.shard[i].m = make(map[string]entry)
		s.shard[i].sweepAt = minSweep
	}
	return s, nil
}

func (s *Store) shardOf(key string) *shard {
	return &s.shard[maphash.String(s.seed, key)&(shardCount-1)]
}

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	if err := store.CheckKey(key); err != nil {
		return store.Claim{}, err
	}
	if lease <= 0 {
		return store.Claim{}, errors.New("memstore: lease must be positive")
	}
	if err := store.CheckLease(lease, s.rules.TTL); err != nil {
		return store.Claim{}, fmt.Errorf("memstore: %w", err)
	}
	opts, err := opts.Checked()
	if err != nil {
		return store.Claim{}, err
	}
	fp := opts.Fingerprint
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now()
	r, found := sh.read(key)
	cur := orNil(&r, found)
	c, next, write := s.rules.Claim(cur, key, opts.ClaimToken, fp, opts.Origin, lease, now)
	if write {
		if cur == nil {
			sh.maybeSweep(now.UnixNano())
		}
		next.Fingerprint = clone(fp) // the record must not share the caller's array
		sh.m[key] = entryOf(&next)
	}
	c.Fingerprint = clone(c.Fingerprint) // nor the claim the record's
	return c, nil
}

// read returns key's record and whether there is one. Called with sh.mu
// held.
func (sh *shard) read(key string) (record.Record, bool) {
	e, ok := sh.m[key]
	if !ok {
		return record.Record{}, false
	}
	return e.record(), true
}

// orNil returns r when ok, else nil: how the rules read an absent record.
func orNil(r *record.Record, ok bool) *record.Record {
	if !ok {
		return nil
	}
	return r
}

// clone returns a copy of b, nil for none.
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// maybeSweep drops expired records once the shard has doubled since the last
// sweep: those the rules, with no skew margin, count as absent (now ≥
// expiresAt), whose fences a record made anew still passes (see the package
// documentation). Called with sh.mu held.
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
	r, found := sh.read(c.Key)
	ok, next, write := s.rules.Complete(orNil(&r, found), c, s.now())
	if write {
		sh.m[c.Key] = entryOf(&next)
	}
	return ok, nil
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
	r, found := sh.read(c.Key)
	if next, write := s.rules.Release(orNil(&r, found), c, s.now()); write {
		sh.m[c.Key] = entryOf(&next)
	}
	return nil
}

// Fail implements [store.Failer].
func (s *Store) Fail(ctx context.Context, c store.Claim, f store.Failure) (int, bool, error) {
	if err := store.CheckWon(c); err != nil {
		return 0, false, err
	}
	if err := store.CheckReason(f.Reason); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	sh := s.shardOf(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r, found := sh.read(c.Key)
	attempts, failed, next, write := s.rules.Fail(orNil(&r, found), c, f, s.now())
	if write {
		sh.m[c.Key] = entryOf(&next)
	}
	return attempts, failed, nil
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
	r, found := sh.read(c.Key)
	out, next, err := s.rules.Extend(orNil(&r, found), c, lease, s.now())
	if err != nil {
		return store.Claim{}, err
	}
	sh.m[c.Key] = entryOf(&next)
	out.Fingerprint = clone(out.Fingerprint)
	return out, nil
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
