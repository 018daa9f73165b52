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

var errNoInspector = errors.New("store does not implement store.Inspector")

func inspector(e *env) (store.Inspector, error) {
	x, ok := e.s.(store.Inspector)
	if !ok {
		return nil, errNoInspector
	}
	return x, nil
}

// inspectorAndClaim returns the store's Inspector and a claim won on key
// for a long lease.
func inspectorAndClaim(e *env, key string) (store.Inspector, store.Claim, error) {
	x, err := inspector(e)
	if err != nil {
		return nil, store.Claim{}, err
	}
	c, err := e.claimE(key, e.lease(), store.Won, "first Claim must win")
	return x, c, err
}

// inspect calls Inspect and fails on error or when the record's presence
// is not want.
func (e *env) inspect(x store.Inspector, key string, want bool, rule string) (store.Record, error) {
	r, ok, err := x.Inspect(e.ctx, key)
	if err != nil {
		return r, fmt.Errorf("%s: Inspect(%.40q) error: %w", rule, key, err)
	}
	if ok != want {
		return r, fmt.Errorf("%s: Inspect(%.40q) found a record = %v, want %v (%+v)", rule, key, ok, want, r)
	}
	if ok && r.Key != key {
		return r, fmt.Errorf("%s: Inspect returned Key %.40q, want %.40q", rule, r.Key, key)
	}
	return r, nil
}

func (e *env) forget(x store.Inspector, key string, want bool, rule string) error {
	ok, err := x.Forget(e.ctx, key)
	if err != nil {
		return fmt.Errorf("%s: Forget(%.40q) error: %w", rule, key, err)
	}
	if ok != want {
		return fmt.Errorf("%s: Forget(%.40q) = %v, want %v", rule, key, ok, want)
	}
	return nil
}

// near reports whether two instants read from the store agree within the
// store's millisecond rounding.
func near(a, b time.Time) bool { return a.Sub(b).Abs() <= time.Millisecond }

// readAtSane checks that ReadAt is the store's clock around the call: the
// fake clock's reading, or the real time give or take a generous skew.
func (e *env) readAtSane(r store.Record, before time.Time) error {
	if e.real {
		if d := time.Until(r.ReadAt).Abs(); d > time.Minute {
			return violated("Inspect ReadAt = %v, %v from the local clock; want the store's clock now", r.ReadAt, d)
		}
		return nil
	}
	if r.ReadAt.Before(before) {
		return violated("Inspect ReadAt = %v, before the call began at %v", r.ReadAt, before)
	}
	return nil
}

func inspectAbsent(e *env) error {
	x, err := inspector(e)
	if err != nil {
		return err
	}
	if _, err := e.inspect(x, "absent", false, "Inspect of an absent key must find nothing"); err != nil {
		return err
	}
	if _, err := e.claimE("other", long, store.Won, "first Claim must win"); err != nil {
		return err
	}
	_, err = e.inspect(x, "absent", false, "Inspect must not see another key's record")
	return err
}

func inspectClaimed(e *env) error {
	x, a, err := inspectorAndClaim(e, "k")
	if err != nil {
		return err
	}
	before := e.now()
	r, err := e.inspect(x, "k", true, "Inspect of a claimed key must find its record")
	if err != nil {
		return err
	}
	switch {
	case r.State != store.Claimed:
		return violated("Inspect of a claimed key: State = %v, want CLAIMED", r.State)
	case r.Fence != a.Fence || r.Token != a.Token:
		return violated("Inspect of a claimed key: fence %d token %q, want the holder's %d %q", r.Fence, r.Token, a.Fence, a.Token)
	case !near(r.LeaseUntil, a.LeaseUntil):
		return violated("Inspect of a claimed key: LeaseUntil = %v, want the holder's %v", r.LeaseUntil, a.LeaseUntil)
	case !near(r.ExpiresAt, a.LeaseUntil.Add(longTTLValue)):
		return violated("Inspect of a claimed key: ExpiresAt = %v, want leaseUntil + ttl = %v", r.ExpiresAt, a.LeaseUntil.Add(longTTLValue))
	case !r.CompletedAt.IsZero():
		return violated("Inspect of a claimed key: CompletedAt = %v, want zero", r.CompletedAt)
	case r.Released() || r.Lapsed():
		return violated("Inspect of a live claim: Released = %v, Lapsed = %v; want neither", r.Released(), r.Lapsed())
	}
	if err := e.readAtSane(r, before); err != nil {
		return err
	}
	// Inspect reads only: the holder keeps the key and completes.
	if _, err := e.claimE("k", long, store.HeldByOther, "Inspect must leave the claim held"); err != nil {
		return err
	}
	return e.completeE(a, true, "the holder must complete after an Inspect")
}

func inspectDone(e *env) error {
	x, a, err := inspectorAndClaim(e, "k")
	if err != nil {
		return err
	}
	e.pass(e.tick) // so that the completion differs from the claim
	before := e.now()
	if err := e.completeE(a, true, "the holder must complete"); err != nil {
		return err
	}
	r, err := e.inspect(x, "k", true, "Inspect of a DONE key must find its record")
	if err != nil {
		return err
	}
	switch {
	case r.State != store.Done:
		return violated("Inspect of a DONE key: State = %v, want DONE", r.State)
	case r.Fence != a.Fence:
		return violated("Inspect of a DONE key: fence %d, want the completer's %d", r.Fence, a.Fence)
	case r.Token != "":
		return violated("Inspect of a DONE key: Token = %q, want empty", r.Token)
	case !r.ExpiresAt.Equal(r.CompletedAt.Add(longTTLValue)):
		return violated("Inspect of a DONE key: ExpiresAt = %v, want CompletedAt + ttl = %v", r.ExpiresAt, r.CompletedAt.Add(longTTLValue))
	case !e.real && !r.CompletedAt.Equal(before):
		return violated("Inspect of a DONE key: CompletedAt = %v, want the instant of Complete %v", r.CompletedAt, before)
	case e.real && (r.CompletedAt.Before(a.LeaseUntil.Add(-long)) || r.CompletedAt.After(r.ReadAt.Add(time.Millisecond))):
		return violated("Inspect of a DONE key: CompletedAt = %v, want between the claim and the read (%v)", r.CompletedAt, r.ReadAt)
	}
	if err := e.readAtSane(r, before); err != nil {
		return err
	}
	_, err = e.claimE("k", long, store.AlreadyDone, "Inspect must leave the key DONE")
	return err
}

func inspectReleased(e *env) error {
	x, a, err := inspectorAndClaim(e, "k")
	if err != nil {
		return err
	}
	if err := e.releaseE(a, "Release by the holder"); err != nil {
		return err
	}
	r, err := e.inspect(x, "k", true, "Inspect of a released key must find its record")
	if err != nil {
		return err
	}
	switch {
	case r.State != store.Claimed || !r.Released():
		return violated("Inspect of a released key: State = %v, Token = %q; want CLAIMED with no token", r.State, r.Token)
	case r.Fence <= a.Fence:
		return violated("Inspect of a released key: fence %d, want above %d (Release raises it)", r.Fence, a.Fence)
	case r.LeaseUntil.After(r.ReadAt):
		return violated("Inspect of a released key: LeaseUntil = %v, after the read at %v; want the lease ended", r.LeaseUntil, r.ReadAt)
	}
	// A lapsed claim, never released.
	b, err := e.claimE("j", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick)
	r, err = e.inspect(x, "j", true, "Inspect of a lapsed claim must find its record")
	if err != nil {
		return err
	}
	if !r.Lapsed() || r.Released() || r.Fence != b.Fence || r.Token != b.Token {
		return violated("Inspect of a lapsed claim = %+v, want the holder's fence and token with its lease over", r)
	}
	return nil
}

func inspectExpired(e *env) error {
	x, a, err := inspectorAndClaim(e, "k")
	if err != nil {
		return err
	}
	if err := e.completeE(a, true, "the holder must complete"); err != nil {
		return err
	}
	if _, err := e.inspect(x, "k", true, "Inspect of a DONE key must find its record"); err != nil {
		return err
	}
	e.pass(e.tick) // the ttl
	if _, err := e.inspect(x, "k", false, "Inspect of a record past its expiry must find nothing (it counts as absent)"); err != nil {
		return err
	}
	return e.forget(x, "k", false, "Forget of a record past its expiry must have nothing to forget")
}

func forgetClaimed(e *env) error {
	x, a, err := inspectorAndClaim(e, "k")
	if err != nil {
		return err
	}
	if err := e.forget(x, "k", true, "Forget of a claimed key"); err != nil {
		return err
	}
	if r, err := e.inspect(x, "k", true, "a forgotten record must still exist (its fence goes on)"); err != nil {
		return err
	} else if !r.Released() || r.Fence <= a.Fence {
		return violated("Inspect after Forget = %+v, want a released claim with a fence above %d", r, a.Fence)
	}
	if err := e.completeE(a, false, "the holder's Complete after Forget must return false (Forget fences it out)"); err != nil {
		return err
	}
	if x, ok := e.s.(store.Extender); ok {
		if _, err := x.Extend(e.ctx, a, long); !errors.Is(err, store.ErrFenced) {
			return violated("Extend by the holder after Forget = %v, want ErrFenced", err)
		}
	}
	b, err := e.claimE("k", long, store.Won, "Claim after Forget must win at once, without waiting for the lease")
	if err != nil {
		return err
	}
	if b.Fence <= a.Fence {
		return violated("Claim after Forget: fence = %d, want above the forgotten holder's %d (Forget must not let fences restart)", b.Fence, a.Fence)
	}
	if err := e.completeE(a, false, "the forgotten holder's Complete must return false on the new claim"); err != nil {
		return err
	}
	if err := e.completeE(b, true, "the new holder must complete"); err != nil {
		return err
	}
	// A lapsed claim whose zombie is still at work: Forget must fence it
	// out too, although nobody has reclaimed the key.
	z, err := e.claimE("j", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick)
	if err := e.forget(x, "j", true, "Forget of a lapsed claim"); err != nil {
		return err
	}
	return e.completeE(z, false, "a zombie's Complete after Forget must return false, although nobody reclaimed")
}

func forgetDone(e *env) error {
	x, a, err := inspectorAndClaim(e, "k")
	if err != nil {
		return err
	}
	if err := e.completeE(a, true, "the holder must complete"); err != nil {
		return err
	}
	if err := e.forget(x, "k", true, "Forget of a DONE key"); err != nil {
		return err
	}
	if err := e.completeE(a, false, "a retried Complete by the completer after Forget must return false (it would undo the Forget)"); err != nil {
		return err
	}
	b, err := e.claimE("k", long, store.Won, "Claim after Forget of a DONE key must win (the work runs again)")
	if err != nil {
		return err
	}
	if b.Fence <= a.Fence {
		return violated("Claim after Forget of a DONE key: fence = %d, want above %d (Forget must not let fences restart)", b.Fence, a.Fence)
	}
	if err := e.completeE(a, false, "the first holder's retried Complete must return false on the new claim"); err != nil {
		return err
	}
	if err := e.completeE(b, true, "the new holder must complete"); err != nil {
		return err
	}
	_, err = e.claimE("k", long, store.AlreadyDone, "the new holder's DONE must stand")
	return err
}

func forgetAbsent(e *env) error {
	x, err := inspector(e)
	if err != nil {
		return err
	}
	if err := e.forget(x, "absent", false, "Forget of an absent key must have nothing to forget"); err != nil {
		return err
	}
	if _, err := e.inspect(x, "absent", false, "Forget of an absent key must create no record"); err != nil {
		return err
	}
	_, err = e.claimE("absent", long, store.Won, "Claim after Forget of an absent key must win")
	return err
}

// inspectArguments: invalid keys and cancelled contexts fail as they do
// for Claim.
func inspectArguments(e *env) error {
	x, err := inspector(e)
	if err != nil {
		return err
	}
	for _, k := range []string{"", "nul\x00byte", "\xff\xfe not utf-8"} {
		if _, _, err := x.Inspect(e.ctx, k); !errors.Is(err, store.ErrInvalidKey) {
			return violated("Inspect(%q) = %v, want an error wrapping store.ErrInvalidKey", k, err)
		}
		if _, err := x.Forget(e.ctx, k); !errors.Is(err, store.ErrInvalidKey) {
			return violated("Forget(%q) = %v, want an error wrapping store.ErrInvalidKey", k, err)
		}
	}
	a, err := e.claimE("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, _, err := x.Inspect(ctx, "k"); !errors.Is(err, context.Canceled) {
		return violated("Inspect with a cancelled context = %v; want an error wrapping context.Canceled", err)
	}
	if _, err := x.Forget(ctx, "k"); !errors.Is(err, context.Canceled) {
		return violated("Forget with a cancelled context = %v; want an error wrapping context.Canceled", err)
	}
	return e.completeE(a, true, "a claim survives a cancelled Forget")
}
