package datastorestore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/store"
)

// Options configures a Store. The zero value means the defaults.
type Options struct {
	// Kind is the entity kind of the records. Default "IdemgateRecord".
	Kind string
	// Namespace is the records' namespace. Default "". The database is the
	// client's (see datastore.NewClientWithDatabase).
	Namespace string
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

const defaultKind = "IdemgateRecord"

// Store is a [store.Store] and [store.Extender] on Datastore that can also
// complete a claim inside the caller's transaction ([Store.CompleteTx]).
// It is safe for concurrent use.
type Store struct {
	client    *datastore.Client
	kind      string
	namespace string
	ops       record.Ops // Complete, Release, Extend, Fail, Forget, Retry: a transaction first
	readOps   record.Ops // Claim, Inspect: a lookup first
	now       func() time.Time
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Extender = (*Store)(nil)
)

var namespaceRE = regexp.MustCompile(`^[0-9A-Za-z._-]{0,100}$`)

// New returns a Store that keeps its records through client. A nil opts
// means the defaults; opts is not modified. New does no I/O.
func New(client *datastore.Client, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("datastorestore: nil client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Kind == "" {
		o.Kind = defaultKind
	}
	switch {
	case len(o.Kind) > maxNameLen, !utf8.ValidString(o.Kind), reserved(o.Kind):
		return nil, fmt.Errorf("datastorestore: invalid kind %.40q (want valid UTF-8, at most %d bytes, not of the form __…__)", o.Kind, maxNameLen)
	case !namespaceRE.MatchString(o.Namespace) || reserved(o.Namespace):
		return nil, fmt.Errorf("datastorestore: invalid namespace %.40q (want at most 100 of [0-9A-Za-z._-], not of the form __…__)", o.Namespace)
	}
	rules, err := record.GoogleRules("datastorestore", o.TTL, o.SkewMargin)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Store{client: client, kind: o.Kind, namespace: o.Namespace, now: o.Now}
	s.ops = record.Ops{
		Name:      "datastorestore",
		Rules:     rules,
		Round:     s.transact,
		Retryable: retryable,
	}
	s.readOps = s.ops
	s.readOps.Round = s.readFirst
	return s, nil
}

// Claim implements [store.Store]. It looks the key's record up and, when
// it wins, writes it on the condition that nobody wrote in between: an
// insert of a new record, a transaction for an existing one. A Claim that
// wins nothing makes that one lookup and writes nothing.
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	return s.readOps.Claim(ctx, key, lease, opts)
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

// reserved reports whether s has the form __…__ Datastore keeps for itself.
func reserved(s string) bool {
	return len(s) >= 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}
