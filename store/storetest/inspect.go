package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
)

// The Inspect and Forget cases. Every store must implement store.Inspector,
// as it must implement store.Extender.

// inspector is the store's Inspector; the suite requires one.
func (e *env) inspector() store.Inspector {
	x, ok := e.s.(store.Inspector)
	e.expect(ok, "store does not implement store.Inspector")
	return x
}

// inspect calls Inspect and fails on error or when the record's presence
// is not want.
func (e *env) inspect(key string, want bool, rule string) store.Record {
	r, ok, err := e.inspector().Inspect(e.ctx, key)
	e.must(err, fmt.Sprintf("%s: Inspect(%.40q) error", rule, key))
	e.expect(ok == want, "%s: Inspect(%.40q) found a record = %v, want %v (%+v)", rule, key, ok, want, r)
	e.expect(!ok || r.Key == key, "%s: Inspect returned Key %.40q, want %.40q", rule, r.Key, key)
	return r
}

func (e *env) forget(key string, want bool, rule string) {
	ok, err := e.inspector().Forget(e.ctx, key)
	e.must(err, fmt.Sprintf("%s: Forget(%.40q) error", rule, key))
	e.expect(ok == want, "%s: Forget(%.40q) = %v, want %v", rule, key, ok, want)
}

// near reports whether two instants read from the store agree within the
// store's millisecond rounding.
func near(a, b time.Time) bool { return a.Sub(b).Abs() <= time.Millisecond }

// readAtSane checks that ReadAt is the store's clock around the call: the
// fake clock's reading, or the real time give or take a generous skew.
func (e *env) readAtSane(r store.Record, before time.Time) {
	if e.real {
		if d := time.Until(r.ReadAt).Abs(); d > time.Minute {
			e.fail("Inspect ReadAt = %v, %v from the local clock; want the store's clock now", r.ReadAt, d)
		}
		return
	}
	e.expect(!r.ReadAt.Before(before), "Inspect ReadAt = %v, before the call began at %v", r.ReadAt, before)
}

func inspectAbsent(e *env) {
	e.inspect("absent", false, "Inspect of an absent key must find nothing")
	e.claim("other", long, store.Won, "first Claim must win")
	e.inspect("absent", false, "Inspect must not see another key's record")
}

func inspectClaimed(e *env) {
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	before := e.now()
	r := e.inspect("k", true, "Inspect of a claimed key must find its record")
	switch {
	case r.State != store.Claimed:
		e.fail("Inspect of a claimed key: State = %v, want CLAIMED", r.State)
	case r.Fence != a.Fence || r.Token != a.Token:
		e.fail("Inspect of a claimed key: fence %d token %q, want the holder's %d %q", r.Fence, r.Token, a.Fence, a.Token)
	case !near(r.LeaseUntil, a.LeaseUntil):
		e.fail("Inspect of a claimed key: LeaseUntil = %v, want the holder's %v", r.LeaseUntil, a.LeaseUntil)
	case !near(r.ExpiresAt, a.LeaseUntil.Add(longTTLValue)):
		e.fail("Inspect of a claimed key: ExpiresAt = %v, want leaseUntil + ttl = %v", r.ExpiresAt, a.LeaseUntil.Add(longTTLValue))
	case !r.CompletedAt.IsZero():
		e.fail("Inspect of a claimed key: CompletedAt = %v, want zero", r.CompletedAt)
	case r.Released() || r.Lapsed():
		e.fail("Inspect of a live claim: Released = %v, Lapsed = %v; want neither", r.Released(), r.Lapsed())
	}
	e.readAtSane(r, before)
	// Inspect reads only: the holder keeps the key and completes.
	e.claim("k", long, store.HeldByOther, "Inspect must leave the claim held")
	e.complete(a, true, "the holder must complete after an Inspect")
}

func inspectDone(e *env) {
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	e.pass(e.tick) // so that the completion differs from the claim
	before := e.now()
	e.complete(a, true, "the holder must complete")
	r := e.inspect("k", true, "Inspect of a DONE key must find its record")
	switch {
	case r.State != store.Done:
		e.fail("Inspect of a DONE key: State = %v, want DONE", r.State)
	case r.Fence != a.Fence:
		e.fail("Inspect of a DONE key: fence %d, want the completer's %d", r.Fence, a.Fence)
	case r.Token != "":
		e.fail("Inspect of a DONE key: Token = %q, want empty", r.Token)
	case !r.ExpiresAt.Equal(r.CompletedAt.Add(longTTLValue)):
		e.fail("Inspect of a DONE key: ExpiresAt = %v, want CompletedAt + ttl = %v", r.ExpiresAt, r.CompletedAt.Add(longTTLValue))
	case !e.real && !r.CompletedAt.Equal(before):
		e.fail("Inspect of a DONE key: CompletedAt = %v, want the instant of Complete %v", r.CompletedAt, before)
	case e.real && (r.CompletedAt.Before(a.LeaseUntil.Add(-long)) || r.CompletedAt.After(r.ReadAt.Add(time.Millisecond))):
		e.fail("Inspect of a DONE key: CompletedAt = %v, want between the claim and the read (%v)", r.CompletedAt, r.ReadAt)
	}
	e.readAtSane(r, before)
	e.claim("k", long, store.AlreadyDone, "Inspect must leave the key DONE")
}

func inspectReleased(e *env) {
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	e.release(a, "Release by the holder")
	r := e.inspect("k", true, "Inspect of a released key must find its record")
	switch {
	case r.State != store.Claimed || !r.Released():
		e.fail("Inspect of a released key: State = %v, Token = %q; want CLAIMED with no token", r.State, r.Token)
	case r.Fence <= a.Fence:
		e.fail("Inspect of a released key: fence %d, want above %d (Release raises it)", r.Fence, a.Fence)
	case r.LeaseUntil.After(r.ReadAt):
		e.fail("Inspect of a released key: LeaseUntil = %v, after the read at %v; want the lease ended", r.LeaseUntil, r.ReadAt)
	}
	// A lapsed claim, never released.
	b := e.claim("j", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	r = e.inspect("j", true, "Inspect of a lapsed claim must find its record")
	e.expect(r.Lapsed() && !r.Released() && r.Fence == b.Fence && r.Token == b.Token, "Inspect of a lapsed claim = %+v, want the holder's fence and token with its lease over", r)
}

func inspectExpired(e *env) {
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	e.complete(a, true, "the holder must complete")
	e.inspect("k", true, "Inspect of a DONE key must find its record")
	e.pass(e.tick) // the ttl
	e.inspect("k", false, "Inspect of a record past its expiry must find nothing (it counts as absent)")
	e.forget("k", false, "Forget of a record past its expiry must have nothing to forget")
}

func forgetClaimed(e *env) {
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	e.forget("k", true, "Forget of a claimed key")
	r := e.inspect("k", true, "a forgotten record must still exist (its fence goes on)")
	e.expect(r.Released() && r.Fence > a.Fence, "Inspect after Forget = %+v, want a released claim with a fence above %d", r, a.Fence)
	e.complete(a, false, "the holder's Complete after Forget must return false (Forget fences it out)")
	if x, ok := e.s.(store.Extender); ok {
		e.extendFenced(x, a, "by the holder after Forget")
	}
	b := e.claim("k", long, store.Won, "Claim after Forget must win at once, without waiting for the lease")
	e.expect(b.Fence > a.Fence, "Claim after Forget: fence = %d, want above the forgotten holder's %d (Forget must not let fences restart)", b.Fence, a.Fence)
	e.complete(a, false, "the forgotten holder's Complete must return false on the new claim")
	e.complete(b, true, "the new holder must complete")
	// A lapsed claim whose zombie is still at work: Forget must fence it
	// out too, although nobody has reclaimed the key.
	z := e.claim("j", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	e.forget("j", true, "Forget of a lapsed claim")
	e.complete(z, false, "a zombie's Complete after Forget must return false, although nobody reclaimed")
}

func forgetDone(e *env) {
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	e.complete(a, true, "the holder must complete")
	e.forget("k", true, "Forget of a DONE key")
	e.complete(a, false, "a retried Complete by the completer after Forget must return false (it would undo the Forget)")
	b := e.claim("k", long, store.Won, "Claim after Forget of a DONE key must win (the work runs again)")
	e.expect(b.Fence > a.Fence, "Claim after Forget of a DONE key: fence = %d, want above %d (Forget must not let fences restart)", b.Fence, a.Fence)
	e.complete(a, false, "the first holder's retried Complete must return false on the new claim")
	e.complete(b, true, "the new holder must complete")
	e.claim("k", long, store.AlreadyDone, "the new holder's DONE must stand")
}

func forgetAbsent(e *env) {
	e.forget("absent", false, "Forget of an absent key must have nothing to forget")
	e.inspect("absent", false, "Forget of an absent key must create no record")
	e.claim("absent", long, store.Won, "Claim after Forget of an absent key must win")
}

// inspectArguments: invalid keys and cancelled contexts fail as they do
// for Claim.
func inspectArguments(e *env) {
	x := e.inspector()
	for _, k := range []string{"", "nul\x00byte", "\xff\xfe not utf-8"} {
		if _, _, err := x.Inspect(e.ctx, k); !errors.Is(err, store.ErrInvalidKey) {
			e.fail("Inspect(%q) = %v, want an error wrapping store.ErrInvalidKey", k, err)
		}
		if _, err := x.Forget(e.ctx, k); !errors.Is(err, store.ErrInvalidKey) {
			e.fail("Forget(%q) = %v, want an error wrapping store.ErrInvalidKey", k, err)
		}
	}
	a := e.claim("k", long, store.Won, "first Claim must win")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, _, err := x.Inspect(ctx, "k"); !errors.Is(err, context.Canceled) {
		e.fail("Inspect with a cancelled context = %v; want an error wrapping context.Canceled", err)
	}
	if _, err := x.Forget(ctx, "k"); !errors.Is(err, context.Canceled) {
		e.fail("Forget with a cancelled context = %v; want an error wrapping context.Canceled", err)
	}
	e.complete(a, true, "a claim survives a cancelled Forget")
}
