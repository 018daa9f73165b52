package firestorestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/store"
)

// Options configures a Store. The zero value means the defaults.
type Options struct {
	// Collection is the collection of the records: a collection ID, or the
	// slash-separated path of a nested collection such as
	// "tenants/acme/idemgate". Default "idemgate_records". The database is
	// the one the client was created for (see
	// firestore.NewClientWithDatabase).
	Collection string
	// TTL is how long a completed record suppresses duplicates, and how long
	// a claimed record outlives its lease. A Claim's lease must be shorter
	// (store.ErrLeaseTooLong), and so must SkewMargin. Default 1h.
	TTL time.Duration
	// SkewMargin is the clock difference tolerated between the processes
	// that share the store: a lapsed lease or an expired record is taken
	// over only when now ≥ leaseUntil + SkewMargin (resp. expiresAt +
	// SkewMargin). Default 0, which trusts the clocks to agree; set it to
	// the worst skew you expect if that is not negligible next to your
	// leases.
	SkewMargin time.Duration
	// Now is the clock that stamps leases and expiry. Default time.Now. It
	// must be a wall clock shared (within SkewMargin) by every process that
	// uses the same records; tests may pass a fake one.
	Now func() time.Time
}

const (
	defaultCollection = "idemgate_records"
	defaultTTL        = time.Hour
)

// Store is a [store.Store] and [store.Extender] on Firestore that can also
// complete a claim inside the caller's transaction ([Store.CompleteTx]).
// It is safe for concurrent use.
type Store struct {
	coll     *firestore.CollectionRef
	ops      record.Ops // Complete, Release, Extend, Fail, Inspect, Forget, Retry: round
	claims   record.Ops // Claim: readRound
	now      func() time.Time
	versions versions

	client *firestore.Client // the outbox's queries and transactions
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Extender = (*Store)(nil)
)

// New returns a Store that keeps its records through client. A nil opts
// means the defaults; opts is copied, never modified. It fails when the
// options are not usable. New does no I/O.
func New(client *firestore.Client, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("firestorestore: nil client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Collection == "" {
		o.Collection = defaultCollection
	}
	if err := checkCollection(o.Collection); err != nil {
		return nil, err
	}
	switch {
	case o.TTL < 0:
		return nil, fmt.Errorf("firestorestore: negative TTL %v", o.TTL)
	case o.SkewMargin < 0:
		return nil, fmt.Errorf("firestorestore: negative SkewMargin %v", o.SkewMargin)
	}
	if o.TTL == 0 {
		o.TTL = defaultTTL
	}
	if o.SkewMargin >= o.TTL {
		// A record made anew after a TTL policy deleted the old one starts
		// at the clock of the process that makes it: above the old fences
		// only if that clock lags by less than a ttl (see store.FenceAt).
		return nil, fmt.Errorf("firestorestore: SkewMargin %v is not shorter than the TTL %v", o.SkewMargin, o.TTL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	coll := client.Collection(o.Collection)
	if coll == nil { // unreachable after checkCollection
		return nil, fmt.Errorf("firestorestore: invalid collection path %q", o.Collection)
	}
	s := &Store{coll: coll, now: o.Now, client: client}
	s.ops = record.Ops{
		Name:      "firestorestore",
		Rules:     record.Rules{TTL: o.TTL, Skew: o.SkewMargin},
		Round:     s.round,
		Retryable: retryable,
	}
	s.claims = s.ops
	s.claims.Round = s.readRound // a Claim may be a duplicate: it reads first
	return s, nil
}

// checkCollection reports whether path names a collection: an odd number
// of segments, each a valid Firestore ID.
func checkCollection(path string) error {
	segs := strings.Split(path, "/")
	if len(segs)%2 == 0 {
		return fmt.Errorf("firestorestore: collection path %q has %d segments; a collection has an odd number (collection/doc/collection…)", path, len(segs))
	}
	for _, s := range segs {
		if !validID(s) {
			return fmt.Errorf("firestorestore: collection path %q: segment %.40q is not a valid ID (want 1 to %d bytes of UTF-8, not \".\", \"..\" or __…__)", path, s, maxIDLen)
		}
	}
	return nil
}

// Claim implements [store.Store]. It reads and, when it wins, writes the
// key's record in one atomic round. It always reads first, so that a
// duplicate costs one read and writes nothing.
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	return s.claims.Claim(ctx, key, lease, opts)
}

// Complete implements [store.Store].
func (s *Store) Complete(ctx context.Context, c store.Claim) (bool, error) {
	return s.ops.Complete(ctx, c)
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, c store.Claim) error {
	return s.ops.Release(ctx, c)
}

// Extend implements [store.Extender].
func (s *Store) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	return s.ops.Extend(ctx, c, lease)
}
