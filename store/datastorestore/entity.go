package datastorestore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/datastore"
)

const (
	// maxNameLen is the longest entity name (and kind) Datastore accepts.
	maxNameLen = 1500
	// hashPrefix starts the name of every entity whose key is hashed.
	// Keys that themselves start with it are hashed too, so a hashed name
	// never equals a key used as a name.
	hashPrefix = "sha256:"
)

// entityName returns the entity name for key and whether it is a hash.
func entityName(key string) (name string, hashed bool) {
	if len(key) <= maxNameLen && !reserved(key) && !strings.HasPrefix(key, hashPrefix) {
		return key, false
	}
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:]), true
}

// entityKey returns the Datastore key of key's record and whether its name
// is a hash.
func (s *Store) entityKey(key string) (*datastore.Key, bool) {
	name, hashed := entityName(key)
	k := datastore.NameKey(s.kind, name, nil)
	k.Namespace = s.namespace
	return k, hashed
}

// The property names.
const (
	propState      = "state"
	propFence      = "fence"
	propToken      = "token"
	propLeaseUntil = "leaseUntil"
	propExpiresAt  = "expiresAt"
	propKey        = "key"
	propFP         = "fingerprint"
	propOrigin     = "origin"
	propAttempts   = "attempts"
	propReason     = "reason"
	propFirstFail  = "firstFailure"
)

// entity is a record as Datastore loads and saves it.
type entity record.Record

// Save implements datastore.PropertyLoadSaver. No property is indexed.
// The optional properties are left out when they hold nothing, so that a
// record that never failed costs the bytes it cost before failures were
// kept.
func (r *entity) Save() ([]datastore.Property, error) {
	ps := []datastore.Property{
		{Name: propState, Value: r.State, NoIndex: true},
		{Name: propFence, Value: r.Fence, NoIndex: true},
		{Name: propToken, Value: r.Token, NoIndex: true},
		{Name: propLeaseUntil, Value: r.LeaseUntil, NoIndex: true},
		{Name: propExpiresAt, Value: r.ExpiresAt, NoIndex: true},
	}
	if r.Key != "" {
		ps = append(ps, datastore.Property{Name: propKey, Value: r.Key, NoIndex: true})
	}
	if len(r.Fingerprint) > 0 {
		ps = append(ps, datastore.Property{Name: propFP, Value: r.Fingerprint, NoIndex: true})
	}
	if r.Origin != "" {
		ps = append(ps, datastore.Property{Name: propOrigin, Value: r.Origin, NoIndex: true})
	}
	if r.Attempts != 0 {
		ps = append(ps, datastore.Property{Name: propAttempts, Value: int64(r.Attempts), NoIndex: true})
	}
	if r.Reason != "" {
		ps = append(ps, datastore.Property{Name: propReason, Value: r.Reason, NoIndex: true})
	}
	if !r.FirstFailure.IsZero() {
		ps = append(ps, datastore.Property{Name: propFirstFail, Value: r.FirstFailure, NoIndex: true})
	}
	return ps, nil
}

// Load implements datastore.PropertyLoadSaver. Unknown properties are
// ignored, so that operators may annotate entities; a known property of the
// wrong type, or a state other than CLAIMED, DONE and FAILED, is an error.
// An entity without a fingerprint, an origin or failures (one written
// before there were any) keeps none.
func (r *entity) Load(ps []datastore.Property) error {
	*r = entity{}
	for _, p := range ps {
		var ok bool
		switch p.Name {
		case propState:
			r.State, ok = p.Value.(string)
		case propFence:
			r.Fence, ok = p.Value.(int64)
		case propToken:
			r.Token, ok = p.Value.(string)
		case propLeaseUntil:
			r.LeaseUntil, ok = p.Value.(time.Time)
		case propExpiresAt:
			r.ExpiresAt, ok = p.Value.(time.Time)
		case propKey:
			r.Key, ok = p.Value.(string)
		case propFP:
			r.Fingerprint, ok = p.Value.([]byte)
		case propOrigin:
			r.Origin, ok = p.Value.(string)
		case propAttempts:
			var n int64
			n, ok = p.Value.(int64)
			r.Attempts = int(n)
		case propReason:
			r.Reason, ok = p.Value.(string)
		case propFirstFail:
			r.FirstFailure, ok = p.Value.(time.Time)
		default:
			ok = true
		}
		if !ok {
			return fmt.Errorf("property %q holds a %T", p.Name, p.Value)
		}
	}
	switch r.State {
	case record.StateClaimed, record.StateDone, record.StateFailed:
	default:
		return fmt.Errorf("property %q is %q, want %q, %q or %q", propState, r.State, record.StateClaimed, record.StateDone, record.StateFailed)
	}
	return nil
}
