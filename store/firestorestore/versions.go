package firestorestore

import (
	"bytes"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store/internal/record"
)

// maxVersions bounds the versions a Store remembers. Past it, putting a new
// key forgets an arbitrary other one, which only costs that key's next
// write a read.
const maxVersions = 4096

// version is a document as it stood at its update time: the precondition
// that makes a write without a read exact. Firestore raises a document's
// update time on every change, so a document whose update time is still at
// holds rec.
type version struct {
	rec record.Record
	at  time.Time
}

// versions remembers, per key, the live claim (CLAIMED, with a token) the
// Store last wrote: the one its holder may Complete, Release or Extend
// next, which are then one conditioned write without a read. It remembers
// nothing it only read, and no released claim: what those could save is
// the read of a Claim, and a Claim may be a duplicate of a message another
// process completed meanwhile, which must be answered by one read and no
// write. It is safe for concurrent use.
type versions struct {
	mu sync.Mutex // guards m
	m  map[string]version
}

// get returns key's version.
func (v *versions) get(key string) (version, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	ver, ok := v.m[key]
	ver.rec.Fingerprint = bytes.Clone(ver.rec.Fingerprint) // the caller's to keep
	return ver, ok
}

// put remembers r, which the Store wrote, as key's document at update time
// at, when r is a live claim; after any other write (DONE, a released
// claim) no write by a holder can follow, and key is forgotten. Times are
// kept at the microsecond, as Firestore stores them.
func (v *versions) put(key string, r *record.Record, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if r == nil || r.State != record.StateClaimed || r.Token == "" || at.IsZero() {
		delete(v.m, key)
		return
	}
	if v.m == nil {
		v.m = make(map[string]version)
	}
	if _, ok := v.m[key]; !ok && len(v.m) >= maxVersions {
		for k := range v.m {
			delete(v.m, k)
			break
		}
	}
	rec := *r
	rec.Fingerprint = bytes.Clone(r.Fingerprint)
	rec.LeaseUntil = r.LeaseUntil.Truncate(time.Microsecond)
	rec.ExpiresAt = r.ExpiresAt.Truncate(time.Microsecond)
	v.m[key] = version{rec: rec, at: at}
}

// seen forgets key's version unless the document was read at update time
// at (the zero time when there is none): a read that finds the remembered
// version keeps it for its holder's next write, as a duplicate answered
// HeldByOther while the holder works; any other shows it stale.
func (v *versions) seen(key string, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ver, ok := v.m[key]; ok && !ver.at.Equal(at) {
		delete(v.m, key)
	}
}

// drop forgets key's version.
func (v *versions) drop(key string) {
	v.mu.Lock()
	delete(v.m, key)
	v.mu.Unlock()
}
