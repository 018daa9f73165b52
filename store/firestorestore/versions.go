package firestorestore

import (
	"bytes"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store/internal/record"
)

// maxVersions bounds the versions a Store remembers; past it a new key
// evicts an arbitrary one, costing that key's next write a read.
const maxVersions = 4096

// version is a document at its update time: Firestore raises it on every
// change, so a document still at at holds rec, and a write conditioned on
// it needs no read.
type version struct {
	rec record.Record
	at  time.Time
}

// versions remembers, per key, the live claim the Store last wrote, so
// that its holder's next write needs no read. It remembers nothing only
// read and no released claim: a Claim may be a duplicate of a message
// completed elsewhere meanwhile, answered by one read and no write. It is
// safe for concurrent use.
type versions struct {
	mu sync.Mutex // guards m
	m  map[string]version
}

func (v *versions) get(key string) (version, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	ver, ok := v.m[key]
	ver.rec.Fingerprint = bytes.Clone(ver.rec.Fingerprint) // the caller's to keep
	return ver, ok
}

// put remembers r, which the Store wrote at update time at, if it is a
// live claim, else forgets key. Times are kept at the microsecond, as
// Firestore stores them.
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
// at (zero for none): a duplicate answered HeldByOther keeps it for the
// holder.
func (v *versions) seen(key string, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ver, ok := v.m[key]; ok && !ver.at.Equal(at) {
		delete(v.m, key)
	}
}

func (v *versions) drop(key string) {
	v.mu.Lock()
	delete(v.m, key)
	v.mu.Unlock()
}
