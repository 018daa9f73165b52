package store

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// ClaimOptions are the inputs of a Claim besides its key and lease. The
// zero value keeps no fingerprint and no origin, and draws a fresh token.
type ClaimOptions struct {
	// Fingerprint, of the delivery's payload, is kept on the record the
	// Claim wins, so that a later Claim can tell a redelivery of the same
	// payload from another payload reusing the key. At most
	// MaxFingerprintLen bytes; nil or empty keeps none.
	Fingerprint []byte
	// Origin names the delivery that runs the work, such as "push/4711"
	// (see MakeOrigin; never the key), kept on the record the Claim wins.
	// Empty keeps none.
	Origin string
	// Token replaces the fresh random token of the Claim: calling Claim
	// again with the same Token after an uncertain failure re-affirms a
	// win with the same fence. Empty draws a fresh one.
	Token string
}

// Checked returns o as a store keeps it (an empty Fingerprint becomes
// nil), or the error of [CheckFingerprint] or [CheckOrigin]. Stores call it
// in Claim and return its error unchanged.
func (o ClaimOptions) Checked() (ClaimOptions, error) {
	if len(o.Fingerprint) == 0 {
		o.Fingerprint = nil
	}
	if err := CheckFingerprint(o.Fingerprint); err != nil {
		return ClaimOptions{}, err
	}
	if err := CheckOrigin(o.Origin); err != nil {
		return ClaimOptions{}, err
	}
	return o, nil
}

// ClaimToken returns o.Token, or a new random token when it is empty.
// Stores call it once per Claim call and reuse it on every internal retry.
func (o ClaimOptions) ClaimToken() string {
	if o.Token != "" {
		return o.Token
	}
	// A token need only differ from every other call's: it proves nothing
	// to an attacker, so math/rand/v2's ChaCha8 does, for less than crypto/rand.
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], rand.Uint64())
	var txt [32]byte
	hex.Encode(txt[:], raw[:])
	return string(txt[:])
}
