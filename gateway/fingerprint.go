package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
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
// message's data and its attributes, each length-prefixed, attributes in
// name order. Attributes whose names begin with "goog" are left out: Google
// reserves them, and its client libraries add some per publish (the trace
// context), so a republish of the same payload would never match.
//
// A messageId key needs no fingerprint (a redelivery is the same message by
// definition); a business key (KeyFromAttribute) should have one, so that two
// different orders sent under one order_id are not silently deduplicated.
func FingerprintPayload(m *pushenvelope.Message) ([]byte, error) {
	h := sha256.New()
	var n [8]byte
	write := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write(m.Data)
	names := make([]string, 0, len(m.Attributes))
	for name := range m.Attributes {
		if !strings.HasPrefix(name, "goog") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		write([]byte(name))
		write([]byte(m.Attributes[name]))
	}
	return h.Sum(nil), nil
}

// ErrConflict is matched (with errors.Is) by the *ConflictError that Lock
// returns when the key's record keeps another payload's fingerprint.
var ErrConflict = errors.New("gateway: conflict: the key was used for another payload")

// ConflictError reports that Key's record keeps the fingerprint Stored
// while the delivery's is Got: the key was reused for a different payload.
// Done says whether the record's work is done; otherwise a live holder
// owns it until LeaseUntil.
type ConflictError struct {
	Key         string
	Stored, Got []byte
	Done        bool
	LeaseUntil  time.Time
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
