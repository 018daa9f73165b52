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
	// Collection is the records' collection: an ID, or the path of a nested
	// one such as "tenants/acme/idemgate". Default "idemgate_records". The
	// database is the client's (see firestore.NewClientWithDatabase).
	Collection string
	// TTL is how long a completed record suppresses duplicates and a
	// claimed one outlives its lease. Leases (store.ErrLeaseTooLong) and
	// SkewMargin must be shorter. Default 1h.
	TTL time.Duration
	// SkewMargin is the clock difference tolerated between the processes
	// sharing the store: a lapsed lease or expired record is taken over
	// only once now ≥ leaseUntil (resp. expiresAt) + SkewMargin. Default 0.
	SkewMargin time.Duration
	// Now stamps leases and expiry: a wall clock shared, within SkewMargin,
	// by every process using the records. Default time.Now.
	Now func() time.Time
}

const defaultCollection = "idemgate_records"

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
// means the defaults; opts is not modified. New does no I/O.
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
	rules, err := record.GoogleRules("firestorestore", o.TTL, o.SkewMargin)
	if err != nil {
		return nil, err
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
		Rules:     rules,
		Round:     s.round,
		Retryable: retryable,
	}
	s.claims = s.ops
	s.claims.Round = s.readRound // a Claim may be a duplicate: it reads first
	return s, nil
}

// checkCollection reports whether path names a collection: an odd number
// of valid IDs.
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
