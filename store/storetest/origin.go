package storetest

import (
	"errors"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
)

// originRules checks the origin a record keeps (see store.ClaimOptions): kept
// at Won, through Extend and Complete; returned to AlreadyDone and
// HeldByOther as the winner's; shown by Inspect with the completion
// instant; replaced by a takeover; kept by Release and Forget as the last
// holder's; empty when none was given; and refused, writing nothing, when
// store.CheckOrigin refuses it.
func originRules(e *env) error {
	in, err := inspector(e)
	if err != nil {
		return err
	}
	x, err := extender(e)
	if err != nil {
		return err
	}
	// The longest origin, of multi-byte characters, must come back whole.
	longest := "pull/" + strings.Repeat("é", (store.MaxOriginLen-len("pull/"))/2)
	longest += strings.Repeat("x", store.MaxOriginLen-len(longest))
	from := func(o string) store.ClaimOptions { return store.ClaimOptions{Origin: o} }
	is := func(got, want, rule string) error {
		if got != want {
			return violated("%s: Origin = %q, want %q", rule, got, want)
		}
		return nil
	}
	inspect := func(key string) (store.Record, error) {
		return e.inspect(in, key, true, "Inspect of a live record must find it")
	}

	a, err := e.claimWithE(from(longest), "k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := is(a.Origin, longest, "Won must return the origin it kept"); err != nil {
		return err
	}
	held, err := e.claimWithE(from("push/m-102"), "k", long, store.HeldByOther, "the key is held")
	if err != nil {
		return err
	}
	if err := is(held.Origin, longest, "HeldByOther must name the holder's origin, not the caller's"); err != nil {
		return err
	}
	if a, err = x.Extend(e.ctx, a, long); err != nil {
		return violated("Extend of a live claim: %w", err)
	}
	r, err := inspect("k")
	if err != nil {
		return err
	}
	if err := is(r.Origin, longest, "Inspect of a claimed key, after Extend"); err != nil {
		return err
	}
	e.pass(e.tick) // so that the completion differs from the claim
	before := e.now()
	if err := e.completeE(a, true, "the holder completes"); err != nil {
		return err
	}
	d, err := e.claimWithE(from("push/m-103"), "k", long, store.AlreadyDone, "the key is done")
	if err != nil {
		return err
	}
	if err := is(d.Origin, longest, "AlreadyDone must name the origin that did the work, kept through Complete"); err != nil {
		return err
	}
	if r, err = inspect("k"); err != nil {
		return err
	}
	if err := is(r.Origin, longest, "Inspect of a DONE key"); err != nil {
		return err
	}
	switch {
	case !e.real && !r.CompletedAt.Equal(before):
		return violated("Inspect of a DONE key: CompletedAt = %v, want the instant of Complete %v", r.CompletedAt, before)
	case e.real && (r.CompletedAt.Before(a.LeaseUntil.Add(-long-time.Millisecond)) || r.CompletedAt.After(r.ReadAt.Add(time.Millisecond))):
		return violated("Inspect of a DONE key: CompletedAt = %v, want between the last Extend and the read at %v", r.CompletedAt, r.ReadAt)
	}

	// A takeover of a lapsed claim keeps the new winner's origin; a Release
	// keeps the last holder's, until a Claim without one wins: none.
	if _, err := e.claimWithE(from("push/m-1"), "t", e.tick, store.Won, "first Claim must win"); err != nil {
		return err
	}
	e.pass(e.tick)
	b, err := e.claimWithE(from("push/m-2"), "t", long, store.Won, "Claim after lapse must win")
	if err != nil {
		return err
	}
	if held, err = e.claimWithE(from("push/m-3"), "t", long, store.HeldByOther, "the new winner holds the key"); err != nil {
		return err
	}
	if err := is(held.Origin, "push/m-2", "HeldByOther after a takeover must name the new winner"); err != nil {
		return err
	}
	if err := e.releaseE(b, "Release of a live claim"); err != nil {
		return err
	}
	if r, err = inspect("t"); err != nil {
		return err
	}
	if err := is(r.Origin, "push/m-2", "Inspect after Release must name the last holder"); err != nil {
		return err
	}
	c, err := e.claimE("t", long, store.Won, "Claim after Release must win")
	if err != nil {
		return err
	}
	if err := is(c.Origin, "", "a Claim without an origin"); err != nil {
		return err
	}
	if held, err = e.claimWithE(from("push/m-4"), "t", long, store.HeldByOther, "the key is held"); err != nil {
		return err
	}
	if err := is(held.Origin, "", "a Claim without an origin must keep none, not the released holder's"); err != nil {
		return err
	}

	// Forget keeps the origin of the work it undoes.
	if _, err := in.Forget(e.ctx, "k"); err != nil {
		return violated("Forget: %w", err)
	}
	if r, err = inspect("k"); err != nil {
		return err
	}
	if err := is(r.Origin, longest, "Inspect after Forget must name the delivery that did the work"); err != nil {
		return err
	}

	// Refused: too long, or not one printable line; nothing is written.
	for _, bad := range []string{longest + "x", "push/\n", "push/\xff"} {
		if _, err := e.s.Claim(e.ctx, "bad", long, from(bad)); !errors.Is(err, store.ErrInvalidOrigin) {
			return violated("Claim with the origin %.20q… (%d bytes) = %v, want an error matching store.ErrInvalidOrigin", bad, len(bad), err)
		}
	}
	_, err = e.claimE("bad", long, store.Won, "a refused origin must not create the record")
	return err
}
