package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/pushenvelope"
)

// FingerprintFunc returns a fingerprint of a delivery's payload, at most
// store.MaxFingerprintLen bytes. With one set on a route, the gateway keeps
// the fingerprint on the key's record when it claims the key, and a later
// delivery of the same key whose fingerprint differs is a conflict, not a
// duplicate: the producer reused the key for another payload. An error
// rejects the delivery as unusable.
type FingerprintFunc func(m *pushenvelope.Message) ([]byte, error)

// FingerprintPayload is the ready FingerprintFunc: SHA-256 over the
// message's data and its attributes, leaving out those whose names begin
// with "goog" (Google's clients add some per publish). On the unwrapped
// form it covers the data alone: there attributes arrive as HTTP headers,
// which cannot be told from those proxies add. Routes of different forms
// that share a store and see attributes should use FingerprintData
// instead (docs/design.md, "Fingerprints across forms").
func FingerprintPayload(m *pushenvelope.Message) ([]byte, error) {
	h := newPayloadHash(m.Data)
	if m.Form == pushenvelope.Unwrapped {
		return h.sum(), nil
	}
	names := make([]string, 0, len(m.Attributes))
	for name := range m.Attributes {
		if !strings.HasPrefix(name, "goog") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		h.write([]byte(name))
		h.write([]byte(m.Attributes[name]))
	}
	return h.sum(), nil
}

// ErrConflict is matched (with errors.Is) by the *ConflictError that Lock
// returns when the key's record keeps another payload's fingerprint.
var ErrConflict = errors.New("gateway: conflict: the key was used for another payload")

// ConflictError reports that Key's record keeps the fingerprint Stored
// while the delivery's is Got: the key was reused for a different payload.
// Done says whether the record's work is done, Failed whether it failed
// for good (the record is FAILED); otherwise a live holder owns it until
// LeaseUntil.
type ConflictError struct {
	Key          string
	Stored, Got  []byte
	Done, Failed bool
	LeaseUntil   time.Time
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("gateway: conflict: key %q is recorded with payload fingerprint %s, the delivery has %s", e.Key, shortFingerprint(e.Stored), shortFingerprint(e.Got))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// conflicting reports whether a delivery with fingerprint got meets a
// record that keeps another one. Without a fingerprint on either side
// there is nothing to compare.
func conflicting(stored, got []byte) bool {
	return len(stored) > 0 && len(got) > 0 && !bytes.Equal(stored, got)
}

// shortFingerprint is the first 8 bytes of fp in hex, for logs.
func shortFingerprint(fp []byte) string {
	return hex.EncodeToString(fp[:min(len(fp), 8)])
}

// FingerprintData returns a FingerprintFunc over the message's data and the
// attributes named, matched in any case, which gives a wrapped, an
// unwrapped, a CloudEvents and a pulled delivery of one message the same
// fingerprint. An attribute named but absent counts as absent, not as
// empty. With no names it fingerprints the data alone.
func FingerprintData(names ...string) FingerprintFunc {
	listed := make([]string, 0, len(names))
	for _, n := range names {
		if n = strings.ToLower(n); n != "" && !slices.Contains(listed, n) {
			listed = append(listed, n)
		}
	}
	slices.Sort(listed)
	return func(m *pushenvelope.Message) ([]byte, error) {
		h := newPayloadHash(m.Data)
		for _, name := range listed {
			if v, ok := namedAttribute(m.Attributes, name); ok {
				h.write([]byte(name))
				h.write([]byte(v))
			}
		}
		return h.sum(), nil
	}
}

// namedAttribute finds the attribute named lower (lower case) in any case.
func namedAttribute(attrs map[string]string, lower string) (string, bool) {
	if v, ok := attrs[lower]; ok {
		return v, true
	}
	found, value, ok := "", "", false
	for k, v := range attrs {
		if strings.EqualFold(k, lower) && (!ok || k < found) {
			found, value, ok = k, v, true
		}
	}
	return value, ok
}

// payloadHash is the encoding both fingerprints hash: the data, then each
// name and value, every field prefixed with its length.
type payloadHash struct {
	h hash.Hash
	n [8]byte
}

func newPayloadHash(data []byte) *payloadHash {
	p := &payloadHash{h: sha256.New()}
	p.write(data)
	return p
}

func (p *payloadHash) write(b []byte) {
	binary.BigEndian.PutUint64(p.n[:], uint64(len(b)))
	p.h.Write(p.n[:])
	p.h.Write(b)
}

func (p *payloadHash) sum() []byte { return p.h.Sum(nil) }
