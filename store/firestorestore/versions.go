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

// versions remembers, per key, the last version of a CLAIMED record the
// Store wrote or read, so that the next write of that key (a Complete, a
// Release, an Extend, a Claim after a Release) can skip the read. It
// never answers an outcome that writes nothing: those always read, so a
// duplicate sees what every other process committed. It is safe for
// concurrent use.
type versions struct {
	mu sync.Mutex // guards m
	m  map[string]version
}

// take returns key's version and forgets it: a round that uses it either
// writes a new one or reads the document.
func (v *versions) take(key string) (version, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	ver, ok := v.m[key]
	delete(v.m, key)
	ver.rec.Fingerprint = bytes.Clone(ver.rec.Fingerprint) // the caller's to keep
	return ver, ok
}

// put remembers r as key's document at update time at, when r is CLAIMED;
// any other record (DONE, or none) is final or unknown, and key is
// forgotten. Times are kept at the microsecond, as Firestore stores them.
func (v *versions) put(key string, r *record.Record, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if r == nil || r.State != record.StateClaimed || at.IsZero() {
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

// drop forgets key's version.
func (v *versions) drop(key string) {
	v.mu.Lock()
	delete(v.m, key)
	v.mu.Unlock()
}
