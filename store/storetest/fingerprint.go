package storetest

import (
	"bytes"
	"errors"

	"github.com/idemgate/idemgate/store"
)

// fingerprintRules checks the record's payload fingerprint: kept at Won,
// returned with AlreadyDone and HeldByOther, kept by Extend and Complete,
// replaced by a takeover, cleared by Release.
func fingerprintRules(e *env) {
	fpA := bytes.Repeat([]byte{0xa1}, store.MaxFingerprintLen)
	fpB := []byte("payload-b")
	with := func(fp []byte) store.ClaimOptions { return store.ClaimOptions{Fingerprint: fp} }
	same := func(got store.Claim, want []byte, rule string) {
		e.expect(bytes.Equal(got.Fingerprint, want), "%s: Fingerprint = %x, want %x", rule, got.Fingerprint, want)
	}

	a := e.claimWith(with(fpA), "k", e.tick, store.Won, "first Claim must win")
	same(a, fpA, "Won must return the fingerprint it kept")
	held := e.claimWith(with(fpB), "k", long, store.HeldByOther, "the key is held")
	same(held, fpA, "HeldByOther must return the holder's fingerprint, not the caller's")
	a, err := e.extender().Extend(e.ctx, a, e.tick)
	e.must(err, "Extend of a live claim")
	held = e.claim("k", long, store.HeldByOther, "the key is held after Extend")
	same(held, fpA, "Extend must keep the fingerprint")
	e.complete(a, true, "the holder completes")
	d := e.claimWith(with(fpB), "k", long, store.AlreadyDone, "the key is done")
	same(d, fpA, "AlreadyDone must return the fingerprint kept at Won, through Complete")

	// A takeover of a lapsed claim keeps the new winner's fingerprint.
	e.claimWith(with(fpA), "t", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	b := e.claimWith(with(fpB), "t", long, store.Won, "Claim after lapse must win")
	same(b, fpB, "a takeover must keep the new winner's fingerprint")
	held = e.claim("t", long, store.HeldByOther, "the new winner holds the key")
	same(held, fpB, "HeldByOther after a takeover")

	// Release clears it: the next winner without one keeps none.
	r := e.claimWith(with(fpA), "r", long, store.Won, "first Claim must win")
	e.release(r, "Release of a live claim")
	r2 := e.claim("r", long, store.Won, "Claim after Release must win")
	same(r2, nil, "a Claim without a fingerprint after Release")
	held = e.claimWith(with(fpB), "r", long, store.HeldByOther, "the key is held")
	same(held, nil, "Release must clear the fingerprint, and a Claim without one keep none")

	// Inspect shows it; Forget, a forced Release, clears it.
	e.claimWith(with(fpA), "i", long, store.Won, "first Claim must win")
	for _, step := range []struct {
		forget bool
		want   []byte
		rule   string
	}{{false, fpA, "Inspect must show the kept fingerprint"}, {true, nil, "Forget must clear the fingerprint, as Release does"}} {
		if step.forget {
			e.forget("i", true, "Forget")
		}
		r := e.inspect("i", true, step.rule)
		e.expect(bytes.Equal(r.Fingerprint, step.want), "%s: Inspect's Fingerprint = %x, want %x", step.rule, r.Fingerprint, step.want)
	}

	// Too long: refused before anything is written.
	_, err = e.s.Claim(e.ctx, "long", long, with(make([]byte, store.MaxFingerprintLen+1)))
	e.expect(errors.Is(err, store.ErrInvalidFingerprint), "Claim with a %d-byte fingerprint = %v, want an error matching store.ErrInvalidFingerprint", store.MaxFingerprintLen+1, err)
	e.claim("long", long, store.Won, "a refused fingerprint must not create the record")
}
