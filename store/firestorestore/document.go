package firestorestore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/firestore"
)

const (
	// maxIDLen is the longest document or collection ID Firestore accepts.
	maxIDLen = 1500
	// hashPrefix starts every hashed document ID. Keys that themselves
	// start with it are hashed too, so a hashed ID never equals a key used
	// as an ID.
	hashPrefix = "sha256:"
)

// validID reports whether Firestore accepts s as a document or collection
// ID.
func validID(s string) bool {
	return s != "" && len(s) <= maxIDLen && utf8.ValidString(s) &&
		!strings.Contains(s, "/") && s != "." && s != ".." &&
		!(len(s) >= 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__"))
}

// docID returns the document ID for key and whether it is a hash.
func docID(key string) (id string, hashed bool) {
	if validID(key) && !strings.HasPrefix(key, hashPrefix) {
		return key, false
	}
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:]), true
}

// docRef returns the reference of key's document and whether its ID is a
// hash.
func (s *Store) docRef(key string) (*firestore.DocumentRef, bool) {
	id, hashed := docID(key)
	return s.coll.Doc(id), hashed
}

// The field names.
const (
	fieldState      = "state"
	fieldFence      = "fence"
	fieldToken      = "token"
	fieldLeaseUntil = "leaseUntil"
	fieldExpiresAt  = "expiresAt"
	fieldKey        = "key"
	fieldFP         = "fingerprint"
	fieldOrigin     = "origin"
	fieldAttempts   = "attempts"
	fieldReason     = "reason"
	fieldFirstFail  = "firstFailure"
)

// fields returns the document of a new record. The optional fields are
// left out when they hold nothing, so that a record that never failed
// costs the bytes it cost before failures were kept.
func fields(r *record.Record) map[string]any {
	m := map[string]any{
		fieldState:      r.State,
		fieldFence:      r.Fence,
		fieldToken:      r.Token,
		fieldLeaseUntil: r.LeaseUntil,
		fieldExpiresAt:  r.ExpiresAt,
	}
	if r.Key != "" {
		m[fieldKey] = r.Key
	}
	if len(r.Fingerprint) > 0 {
		m[fieldFP] = r.Fingerprint
	}
	if r.Origin != "" {
		m[fieldOrigin] = r.Origin
	}
	if r.Attempts != 0 {
		m[fieldAttempts] = int64(r.Attempts)
	}
	if r.Reason != "" {
		m[fieldReason] = r.Reason
	}
	if !r.FirstFailure.IsZero() {
		m[fieldFirstFail] = r.FirstFailure
	}
	return m
}

// updates returns the changes that turn a stored record into r; the key
// field never changes. An optional field that r does not hold (a
// fingerprint, an origin, failures) is deleted in the same write.
func updates(r *record.Record) []firestore.Update {
	var fp, origin, attempts, reason, first any = firestore.Delete, firestore.Delete, firestore.Delete, firestore.Delete, firestore.Delete
	if len(r.Fingerprint) > 0 {
		fp = r.Fingerprint
	}
	if r.Origin != "" {
		origin = r.Origin
	}
	if r.Attempts != 0 {
		attempts = int64(r.Attempts)
	}
	if r.Reason != "" {
		reason = r.Reason
	}
	if !r.FirstFailure.IsZero() {
		first = r.FirstFailure
	}
	return []firestore.Update{
		{Path: fieldState, Value: r.State},
		{Path: fieldFence, Value: r.Fence},
		{Path: fieldToken, Value: r.Token},
		{Path: fieldLeaseUntil, Value: r.LeaseUntil},
		{Path: fieldExpiresAt, Value: r.ExpiresAt},
		{Path: fieldFP, Value: fp},
		{Path: fieldOrigin, Value: origin},
		{Path: fieldAttempts, Value: attempts},
		{Path: fieldReason, Value: reason},
		{Path: fieldFirstFail, Value: first},
	}
}

// parse reads a record from a document's data. Unknown fields are ignored,
// so that operators may annotate documents; a known field of the wrong type,
// or a state other than CLAIMED, DONE and FAILED, is an error. A document
// without a fingerprint, an origin or failures (one written before there
// were any) keeps none.
func parse(data map[string]any) (record.Record, error) {
	var r record.Record
	for name, v := range data {
		var ok bool
		switch name {
		case fieldState:
			r.State, ok = v.(string)
		case fieldFence:
			r.Fence, ok = v.(int64)
		case fieldToken:
			r.Token, ok = v.(string)
		case fieldLeaseUntil:
			r.LeaseUntil, ok = v.(time.Time)
		case fieldExpiresAt:
			r.ExpiresAt, ok = v.(time.Time)
		case fieldKey:
			r.Key, ok = v.(string)
		case fieldFP:
			r.Fingerprint, ok = v.([]byte)
		case fieldOrigin:
			r.Origin, ok = v.(string)
		case fieldAttempts:
			var n int64
			n, ok = v.(int64)
			r.Attempts = int(n)
		case fieldReason:
			r.Reason, ok = v.(string)
		case fieldFirstFail:
			r.FirstFailure, ok = v.(time.Time)
		default:
			ok = true
		}
		if !ok {
			return record.Record{}, fmt.Errorf("field %q holds a %T", name, v)
		}
	}
	switch r.State {
	case record.StateClaimed, record.StateDone, record.StateFailed:
	default:
		return record.Record{}, fmt.Errorf("field %q is %q, want %q, %q or %q", fieldState, r.State, record.StateClaimed, record.StateDone, record.StateFailed)
	}
	return r, nil
}
