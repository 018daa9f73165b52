package googletest

import (
	"bytes"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Fingerprint is the payload fingerprint the shared tests claim with: a
// full-size one, as long as a SHA-256 sum.
var Fingerprint = bytes.Repeat([]byte{0xa1, 0x00, ':'}, store.MaxFingerprintLen/3+1)[:store.MaxFingerprintLen]

// Unfingerprinted checks that records written before stores kept
// fingerprints, which have no fingerprint field, read as keeping none, and
// that a Claim taking one over keeps its own. put writes a record under
// key with the store's raw client, from its fields by name (state, fence,
// token, leaseUntil, expiresAt), on behalf of an older version. st must be
// fresh and on the real clock.
func Unfingerprinted(t *testing.T, st Store, put func(t *testing.T, key string, fields map[string]any)) {
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: Fingerprint}
	now := time.Now()
	old := func(state string, leaseUntil time.Time) map[string]any {
		return map[string]any{
			"state": state, "fence": int64(3), "token": "old-token",
			"leaseUntil": leaseUntil, "expiresAt": now.Add(time.Hour),
		}
	}
	put(t, "done", old("DONE", now))
	put(t, "held", old("CLAIMED", now.Add(time.Hour)))
	put(t, "lapsed", old("CLAIMED", now.Add(-time.Hour)))

	for key, want := range map[string]store.Status{"done": store.AlreadyDone, "held": store.HeldByOther} {
		c, err := st.Claim(ctx, key, time.Minute, opts)
		if err != nil || c.Status != want || c.Fence != 3 || c.Fingerprint != nil {
			t.Errorf("Claim of an old %s record = %v at fence %d with fingerprint %x, %v; want %v at fence 3 with none", key, c.Status, c.Fence, c.Fingerprint, err, want)
		}
	}
	c, err := st.Claim(ctx, "lapsed", time.Minute, opts)
	if err != nil || c.Status != store.Won || c.Fence <= 3 || !bytes.Equal(c.Fingerprint, Fingerprint) {
		t.Fatalf("Claim of an old lapsed record = %v at fence %d with fingerprint %x, %v; want Won above fence 3 with the Claim's", c.Status, c.Fence, c.Fingerprint, err)
	}
	h, err := st.Claim(t.Context(), "lapsed", time.Minute, store.ClaimOptions{})
	if err != nil || h.Status != store.HeldByOther || !bytes.Equal(h.Fingerprint, Fingerprint) {
		t.Errorf("Claim of the taken-over record = %v with fingerprint %x, %v; want HeldByOther with the new winner's", h.Status, h.Fingerprint, err)
	}
}
