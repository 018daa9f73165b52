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
func originRules(e *env) {
	x := e.extender()
	// The longest origin, of multi-byte characters, must come back whole.
	longest := "pull/" + strings.Repeat("é", (store.MaxOriginLen-len("pull/"))/2)
	longest += strings.Repeat("x", store.MaxOriginLen-len(longest))
	from := func(o string) store.ClaimOptions { return store.ClaimOptions{Origin: o} }
	is := func(got, want, rule string) {
		e.expect(got == want, "%s: Origin = %q, want %q", rule, got, want)
	}
	inspect := func(key string) store.Record {
		return e.inspect(key, true, "Inspect of a live record must find it")
	}

	a := e.claimWith(from(longest), "k", long, store.Won, "first Claim must win")
	is(a.Origin, longest, "Won must return the origin it kept")
	held := e.claimWith(from("push/m-102"), "k", long, store.HeldByOther, "the key is held")
	is(held.Origin, longest, "HeldByOther must name the holder's origin, not the caller's")
	a, err := x.Extend(e.ctx, a, long)
	e.must(err, "Extend of a live claim")
	r := inspect("k")
	is(r.Origin, longest, "Inspect of a claimed key, after Extend")
	e.pass(e.tick) // so that the completion differs from the claim
	before := e.now()
	e.complete(a, true, "the holder completes")
	d := e.claimWith(from("push/m-103"), "k", long, store.AlreadyDone, "the key is done")
	is(d.Origin, longest, "AlreadyDone must name the origin that did the work, kept through Complete")
	r = inspect("k")
	is(r.Origin, longest, "Inspect of a DONE key")
	switch {
	case !e.real && !r.CompletedAt.Equal(before):
		e.fail("Inspect of a DONE key: CompletedAt = %v, want the instant of Complete %v", r.CompletedAt, before)
	case e.real && (r.CompletedAt.Before(a.LeaseUntil.Add(-long-time.Millisecond)) || r.CompletedAt.After(r.ReadAt.Add(time.Millisecond))):
		e.fail("Inspect of a DONE key: CompletedAt = %v, want between the last Extend and the read at %v", r.CompletedAt, r.ReadAt)
	}

	// A takeover of a lapsed claim keeps the new winner's origin; a Release
	// keeps the last holder's, until a Claim without one wins: none.
	e.claimWith(from("push/m-1"), "t", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	b := e.claimWith(from("push/m-2"), "t", long, store.Won, "Claim after lapse must win")
	held = e.claimWith(from("push/m-3"), "t", long, store.HeldByOther, "the new winner holds the key")
	is(held.Origin, "push/m-2", "HeldByOther after a takeover must name the new winner")
	e.release(b, "Release of a live claim")
	r = inspect("t")
	is(r.Origin, "push/m-2", "Inspect after Release must name the last holder")
	c := e.claim("t", long, store.Won, "Claim after Release must win")
	is(c.Origin, "", "a Claim without an origin")
	held = e.claimWith(from("push/m-4"), "t", long, store.HeldByOther, "the key is held")
	is(held.Origin, "", "a Claim without an origin must keep none, not the released holder's")

	// Forget keeps the origin of the work it undoes.
	e.forget("k", true, "Forget")
	r = inspect("k")
	is(r.Origin, longest, "Inspect after Forget must name the delivery that did the work")

	// Refused: too long, or not one printable line; nothing is written.
	for _, bad := range []string{longest + "x", "push/\n", "push/\xff"} {
		_, err := e.s.Claim(e.ctx, "bad", long, from(bad))
		e.expect(errors.Is(err, store.ErrInvalidOrigin), "Claim with the origin %.20q… (%d bytes) = %v, want an error matching store.ErrInvalidOrigin", bad, len(bad), err)
	}
	e.claim("bad", long, store.Won, "a refused origin must not create the record")
}
