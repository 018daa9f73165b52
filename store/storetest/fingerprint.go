package storetest

import (
	"bytes"
	"errors"

	"github.com/idemgate/idemgate/store"
)

// fingerprintRules checks the record's payload fingerprint: kept at Won,
// returned with AlreadyDone and HeldByOther, kept by Extend and Complete,
// replaced by a takeover, cleared by Release.
func fingerprintRules(e *env) error {
	fpA := bytes.Repeat([]byte{0xa1}, store.MaxFingerprintLen)
	fpB := []byte("payload-b")
	with := func(fp []byte) store.ClaimOptions { return store.ClaimOptions{Fingerprint: fp} }
	same := func(got store.Claim, want []byte, rule string) error {
		if !bytes.Equal(got.Fingerprint, want) {
			return violated("%s: Fingerprint = %x, want %x", rule, got.Fingerprint, want)
		}
		return nil
	}

	a, err := e.claimWithE(with(fpA), "k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := same(a, fpA, "Won must return the fingerprint it kept"); err != nil {
		return err
	}
	held, err := e.claimWithE(with(fpB), "k", long, store.HeldByOther, "the key is held")
	if err != nil {
		return err
	}
	if err := same(held, fpA, "HeldByOther must return the holder's fingerprint, not the caller's"); err != nil {
		return err
	}
	x, err := extender(e)
	if err != nil {
		return err
	}
	if a, err = x.Extend(e.ctx, a, e.tick); err != nil {
		return violated("Extend of a live claim: %w", err)
	}
	if held, err = e.claimE("k", long, store.HeldByOther, "the key is held after Extend"); err != nil {
		return err
	}
	if err := same(held, fpA, "Extend must keep the fingerprint"); err != nil {
		return err
	}
	if err := e.completeE(a, true, "the holder completes"); err != nil {
		return err
	}
	d, err := e.claimWithE(with(fpB), "k", long, store.AlreadyDone, "the key is done")
	if err != nil {
		return err
	}
	if err := same(d, fpA, "AlreadyDone must return the fingerprint kept at Won, through Complete"); err != nil {
		return err
	}

	// A takeover of a lapsed claim keeps the new winner's fingerprint.
	if _, err := e.claimWithE(with(fpA), "t", e.tick, store.Won, "first Claim must win"); err != nil {
		return err
	}
	e.pass(e.tick)
	b, err := e.claimWithE(with(fpB), "t", long, store.Won, "Claim after lapse must win")
	if err != nil {
		return err
	}
	if err := same(b, fpB, "a takeover must keep the new winner's fingerprint"); err != nil {
		return err
	}
	if held, err = e.claimE("t", long, store.HeldByOther, "the new winner holds the key"); err != nil {
		return err
	}
	if err := same(held, fpB, "HeldByOther after a takeover"); err != nil {
		return err
	}

	// Release clears it: the next winner without one keeps none.
	r, err := e.claimWithE(with(fpA), "r", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.releaseE(r, "Release of a live claim"); err != nil {
		return err
	}
	r2, err := e.claimE("r", long, store.Won, "Claim after Release must win")
	if err != nil {
		return err
	}
	if err := same(r2, nil, "a Claim without a fingerprint after Release"); err != nil {
		return err
	}
	if held, err = e.claimWithE(with(fpB), "r", long, store.HeldByOther, "the key is held"); err != nil {
		return err
	}
	if err := same(held, nil, "Release must clear the fingerprint, and a Claim without one keep none"); err != nil {
		return err
	}

	// Inspect shows it; Forget, a forced Release, clears it.
	in, ok := e.s.(store.Inspector)
	if !ok {
		return violated("%T does not implement store.Inspector", e.s)
	}
	if _, err := e.claimWithE(with(fpA), "i", long, store.Won, "first Claim must win"); err != nil {
		return err
	}
	for _, step := range []struct {
		forget bool
		want   []byte
		rule   string
	}{{false, fpA, "Inspect must show the kept fingerprint"}, {true, nil, "Forget must clear the fingerprint, as Release does"}} {
		if step.forget {
			if _, err := in.Forget(e.ctx, "i"); err != nil {
				return violated("Forget: %w", err)
			}
		}
		r, _, err := in.Inspect(e.ctx, "i")
		if err != nil {
			return violated("Inspect: %w", err)
		}
		if !bytes.Equal(r.Fingerprint, step.want) {
			return violated("%s: Inspect's Fingerprint = %x, want %x", step.rule, r.Fingerprint, step.want)
		}
	}

	// Too long: refused before anything is written.
	if _, err := e.s.Claim(e.ctx, "long", long, with(make([]byte, store.MaxFingerprintLen+1))); !errors.Is(err, store.ErrInvalidFingerprint) {
		return violated("Claim with a %d-byte fingerprint = %v, want an error matching store.ErrInvalidFingerprint", store.MaxFingerprintLen+1, err)
	}
	_, err = e.claimE("long", long, store.Won, "a refused fingerprint must not create the record")
	return err
}
