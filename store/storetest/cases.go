package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store"
)

type testCase struct {
	name string
	ttl  ttlKind
	fn   func(e *env) error
}

const long = time.Hour

var cases = []testCase{
	{"ClaimAbsentWins", longTTL, claimAbsentWins},
	{"ClaimWhileHeld", longTTL, claimWhileHeld},
	{"ConcurrentClaimsOneWinner", longTTL, concurrentClaims},
	{"CrashedHolderReclaimed", longTTL, crashedHolderReclaimed},
	{"ZombieFencedOut", longTTL, zombieFencedOut},
	{"LateCompleteCommits", longTTL, lateCompleteCommits},
	{"CompleteThenDuplicate", longTTL, completeThenDuplicate},
	{"CompleteStaleOrAbsent", longTTL, completeStaleOrAbsent},
	{"ReleaseThenReclaim", longTTL, releaseThenReclaim},
	{"ReleaseIgnoredWhenNotHeld", longTTL, releaseIgnored},
	{"TTLExpiryReclaims", shortTTL, ttlExpiryReclaims},
	{"RetriedClaimReaffirms", longTTL, retriedClaimReaffirms},
	{"ReleasedTokenNotReaffirmed", longTTL, releasedTokenNotReaffirmed},
	{"Extend", longTTL, extend},
	{"ExtendFenced", longTTL, extendFenced},
	{"UnusualKeys", longTTL, unusualKeysDistinct},
	{"InvalidKeys", longTTL, invalidKeys},
	{"CancelledContext", longTTL, cancelledContext},
	{"KeysInErrors", longTTL, keysInErrors},
	{"LeaseEdgeTakeovers", longTTL, leaseEdgeTakeovers},
	{"Linearizable", longTTL, linearizable},
	{"CompleteTxNeedsInTx", longTTL, txConfigured},
	{"Fingerprints", longTTL, fingerprintRules},
	{"Origins", longTTL, originRules},
	{"InspectAbsent", longTTL, inspectAbsent},
	{"InspectClaimed", longTTL, inspectClaimed},
	{"InspectDone", longTTL, inspectDone},
	{"InspectReleasedOrLapsed", longTTL, inspectReleased},
	{"InspectExpired", shortTTL, inspectExpired},
	{"InspectForgetArguments", longTTL, inspectArguments},
	{"ForgetClaimed", longTTL, forgetClaimed},
	{"ForgetDone", longTTL, forgetDone},
	{"ForgetAbsent", longTTL, forgetAbsent},
	{"ListStates", longTTL, listStates},
	{"ListPaging", longTTL, listPaging},
	{"ListExpired", shortTTL, listExpired},
	{"ListArguments", longTTL, listArguments},
	{"FailCounted", longTTL, failCounted},
	{"FailFinal", longTTL, failFinal},
	{"FailNotOwned", longTTL, failNotOwned},
	{"FailTakeoverCounts", longTTL, failTakeoverCounts},
	{"FailRetry", longTTL, failRetry},
	{"FailForget", longTTL, failForget},
	{"FailExpires", shortTTL, failExpires},
	{"NotWonClaimRefused", longTTL, notWonClaimRefused},
	{"FencesNeverRepeat", shortTTL, fencesNeverRepeat},
	{"TokenChecked", longTTL, tokenChecked},
	{"LeaseNotShorterThanTTL", shortTTL, leaseTooLong},
}

// violated reports a broken rule. Its text starts with the call that broke
// it ("Claim(...) = ..."), capitalised like the method it names.
func violated(format string, args ...any) error { return fmt.Errorf(format, args...) }

func claimAbsentWins(e *env) error {
	before := e.now()
	c, err := e.claim("k", long, store.Won, "Claim of an absent key must win")
	if err != nil {
		return err
	}
	if c.Fence <= 0 {
		return violated("Claim of an absent key: fence = %d, want a positive fence", c.Fence)
	}
	if c.Token == "" {
		return errors.New("a winning Claim must carry a token")
	}
	if !e.real && !c.LeaseUntil.Equal(before.Add(long)) {
		return violated("Won LeaseUntil = %v, want now+lease = %v", c.LeaseUntil, before.Add(long))
	}
	if e.real && time.Until(c.LeaseUntil) < long-time.Minute {
		return violated("Won LeaseUntil = %v, want about an hour from now", c.LeaseUntil)
	}
	other, err := e.claim("k2", long, store.Won, "Claim of another absent key must win")
	if err != nil {
		return err
	}
	if other.Token == c.Token {
		return errors.New("two Claim calls must get different tokens")
	}
	return nil
}

func claimWhileHeld(e *env) error {
	c, err := e.claim("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	h, err := e.claim("k", long, store.HeldByOther, "Claim while the lease is live must report HeldByOther")
	if err != nil {
		return err
	}
	if err := fenceIs(h, c.Fence, "HeldByOther must not change the fence"); err != nil {
		return err
	}
	if d := h.LeaseUntil.Sub(c.LeaseUntil).Abs(); d > time.Millisecond {
		return violated("HeldByOther LeaseUntil = %v, want the holder's %v", h.LeaseUntil, c.LeaseUntil)
	}
	if h.Token != "" {
		return violated("HeldByOther must not reveal the holder's token")
	}
	// The holder is unaffected: it still completes.
	return e.complete(c, true, "the holder must complete after a HeldByOther")
}

func concurrentClaims(e *env) error {
	const n = 64
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		res   = make([]store.Claim, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			res[i], errs[i] = e.s.Claim(e.ctx, "hot", long, store.ClaimOptions{})
		})
	}
	close(start)
	wg.Wait()
	wins := 0
	for i := range n {
		if errs[i] != nil {
			return fmt.Errorf("concurrent Claim error: %w", errs[i])
		}
		switch res[i].Status {
		case store.Won:
			wins++
		case store.HeldByOther:
		default:
			return fmt.Errorf("concurrent Claim = %v, want Won or HeldByOther", res[i].Status)
		}
	}
	if wins != 1 {
		return fmt.Errorf("%d concurrent Claims on one key: %d won, want exactly 1 (claim must be atomic)", n, wins)
	}
	return nil
}

func crashedHolderReclaimed(e *env) error {
	a, err := e.claim("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick) // a never completes nor releases: it crashed
	b, err := e.claim("k", long, store.Won, "Claim after the holder's lease lapsed must win")
	if err != nil {
		return err
	}
	if b.Fence <= a.Fence {
		return violated("a reclaim must raise the fence: fence = %d, want above %d", b.Fence, a.Fence)
	}
	if b.Token == a.Token {
		return errors.New("a reclaim must carry the new caller's token")
	}
	_, err = e.claim("k", long, store.HeldByOther, "the reclaimer must hold the key")
	return err
}

func zombieFencedOut(e *env) error {
	zombie, err := e.claim("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick)
	b, err := e.claim("k", long, store.Won, "Claim after lapse must win")
	if err != nil {
		return err
	}
	if err := e.complete(zombie, false, "Complete by a zombie after a reclaim must return false"); err != nil {
		return err
	}
	if err := e.release(zombie, "Release by a zombie after a reclaim must be a no-op"); err != nil {
		return err
	}
	if _, err := e.claim("k", long, store.HeldByOther, "a zombie's Release must not free its successor's key"); err != nil {
		return err
	}
	if err := e.complete(b, true, "the successor must still complete after the zombie's attempts"); err != nil {
		return err
	}
	if err := e.complete(zombie, false, "Complete by a zombie must return false on its successor's DONE record"); err != nil {
		return err
	}
	_, err = e.claim("k", long, store.AlreadyDone, "the successor's DONE must stand")
	return err
}

func lateCompleteCommits(e *env) error {
	a, err := e.claim("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick) // the work outran its lease, but nobody reclaimed
	if err := e.complete(a, true, "Complete after the lease lapsed must commit when nobody reclaimed (no lease check)"); err != nil {
		return err
	}
	_, err = e.claim("k", long, store.AlreadyDone, "a late Complete must leave the key DONE")
	return err
}

func completeThenDuplicate(e *env) error {
	a, err := e.claim("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.complete(a, true, "Complete by the holder must return true"); err != nil {
		return err
	}
	if err := e.complete(a, true, "a retried Complete on DONE must return true"); err != nil {
		return err
	}
	d, err := e.claim("k", long, store.AlreadyDone, "Claim of a DONE key must report AlreadyDone")
	if err != nil {
		return err
	}
	if err := fenceIs(d, a.Fence, "AlreadyDone must not change the fence"); err != nil {
		return err
	}
	if err := e.release(a, "Release of a DONE record must be a no-op"); err != nil {
		return err
	}
	_, err = e.claim("k", long, store.AlreadyDone, "Release must not undo DONE")
	return err
}

func completeStaleOrAbsent(e *env) error {
	if err := e.complete(store.Claim{Key: "absent", Status: store.Won, Fence: 1, Token: "t"}, false, "Complete of an absent record must return false"); err != nil {
		return err
	}
	a, err := e.claim("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	stale := a
	stale.Fence = a.Fence + 5
	if err := e.complete(stale, false, "Complete with a fence that does not match must return false"); err != nil {
		return err
	}
	if _, err := e.claim("k", long, store.HeldByOther, "a refused Complete must leave the claim in place"); err != nil {
		return err
	}
	if err := e.complete(a, true, "the holder must complete"); err != nil {
		return err
	}
	return e.complete(stale, false, "Complete with a wrong fence on a DONE record must return false")
}

func releaseThenReclaim(e *env) error {
	a, err := e.claim("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.release(a, "Release by the holder"); err != nil {
		return err
	}
	if err := e.complete(a, false, "a released claim must never complete (Release bumps the fence)"); err != nil {
		return err
	}
	b, err := e.claim("k", long, store.Won, "Claim right after Release must win without waiting for the lease")
	if err != nil {
		return err
	}
	if b.Fence < a.Fence+2 {
		return violated("Release then reclaim must raise the fence twice: fence = %d, want at least %d", b.Fence, a.Fence+2)
	}
	if err := e.release(a, "a second Release of the old claim must be a no-op"); err != nil {
		return err
	}
	if _, err := e.claim("k", long, store.HeldByOther, "an old claim's Release must not free the new holder"); err != nil {
		return err
	}
	return e.complete(b, true, "the new holder must complete")
}

func releaseIgnored(e *env) error {
	return e.release(store.Claim{Key: "absent", Status: store.Won, Fence: 1, Token: "t"}, "Release of an absent record must be a no-op")
}

func ttlExpiryReclaims(e *env) error {
	a, err := e.claim("k", e.lease(), store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.complete(a, true, "the holder must complete"); err != nil {
		return err
	}
	e.pass(e.tick) // the ttl
	b, err := e.claim("k", e.lease(), store.Won, "Claim after a DONE record's ttl must win")
	if err != nil {
		return err
	}
	if b.Fence <= a.Fence {
		// A store may have deleted the expired record (fence restarts at 1)
		// only if it is gone for good; the record was DONE and outlived every
		// holder, so rising is what we require here.
		return violated("Claim after ttl expiry: fence = %d, want > %d (the fence must never go back while the record exists)", b.Fence, a.Fence)
	}
	return e.complete(a, false, "the expired holder must not complete over the new claim")
}

func retriedClaimReaffirms(e *env) error {
	opts := store.ClaimOptions{Token: "retry-token-1"}
	a, err := e.s.Claim(e.ctx, "k", long, opts)
	if err != nil || a.Status != store.Won {
		return violated("Claim with a fixed token = %v, %v; want Won", a.Status, err)
	}
	if a.Token != "retry-token-1" {
		return violated("Claim Token = %q, want the one from ClaimOptions.Token", a.Token)
	}
	b, err := e.s.Claim(e.ctx, "k", long, opts)
	if err != nil || b.Status != store.Won || b.Fence != a.Fence {
		return fmt.Errorf("a retried Claim with the same token = %v fence %d, %v; want Won with the same fence %d (re-affirm)", b.Status, b.Fence, err, a.Fence)
	}
	if _, err := e.claim("k", long, store.HeldByOther, "another token must still see HeldByOther"); err != nil {
		return err
	}
	// The reclaim path: a lapsed claim, reclaimed with a fixed token, retried.
	c, err := e.claim("j", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick)
	opts2 := store.ClaimOptions{Token: "retry-token-2"}
	d1, err := e.s.Claim(e.ctx, "j", long, opts2)
	if err != nil || d1.Status != store.Won || d1.Fence <= c.Fence {
		return fmt.Errorf("reclaim = %v fence %d, %v; want Won with a fence above %d", d1.Status, d1.Fence, err, c.Fence)
	}
	d2, err := e.s.Claim(e.ctx, "j", long, opts2)
	if err != nil || d2.Status != store.Won || d2.Fence != d1.Fence {
		return fmt.Errorf("a retried reclaim = %v fence %d, %v; want Won with the same fence %d (no double bump)", d2.Status, d2.Fence, err, d1.Fence)
	}
	return e.complete(d2, true, "the re-affirmed claim must complete")
}

// releasedTokenNotReaffirmed: a Claim that reuses the token of a released
// claim must win anew (the release abandoned that claim), never re-affirm it
// with the lapsed lease the release left behind.
func releasedTokenNotReaffirmed(e *env) error {
	opts := store.ClaimOptions{Token: "released-token"}
	a, err := e.s.Claim(e.ctx, "k", long, opts)
	if err != nil || a.Status != store.Won {
		return violated("Claim with a fixed token = %v, %v; want Won", a.Status, err)
	}
	if err := e.release(a, "Release by the holder"); err != nil {
		return err
	}
	b, err := e.s.Claim(e.ctx, "k", long, opts)
	if err != nil || b.Status != store.Won {
		return violated("Claim reusing a released token = %v, %v; want Won", b.Status, err)
	}
	if b.Fence < a.Fence+2 {
		return violated("a Claim reusing a released claim's token must take the key anew (a fence raised twice, at least %d), not re-affirm the released claim: fence = %d", a.Fence+2, b.Fence)
	}
	if time.Until(b.LeaseUntil) < long-time.Minute && e.real || !e.real && !b.LeaseUntil.Equal(e.now().Add(long)) {
		return violated("Claim reusing a released token: LeaseUntil = %v, want a fresh lease", b.LeaseUntil)
	}
	_, err = e.claim("k", long, store.HeldByOther, "the new claim must hold the key")
	return err
}

func extender(e *env) (store.Extender, error) {
	x, ok := e.s.(store.Extender)
	if !ok {
		return nil, errNoExtender
	}
	return x, nil
}

func extend(e *env) error {
	x, err := extender(e)
	if err != nil {
		return err
	}
	a, err := e.claim("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	b, err := x.Extend(e.ctx, a, long)
	if err != nil {
		return violated("Extend of a live claim: %w", err)
	}
	if b.Fence != a.Fence || b.Token != a.Token || b.Status != store.Won || b.Key != a.Key {
		return violated("Extend returned %+v, want the same claim with a later lease", b)
	}
	if !b.LeaseUntil.After(a.LeaseUntil) {
		return violated("Extend LeaseUntil = %v, want after %v", b.LeaseUntil, a.LeaseUntil)
	}
	e.pass(e.tick) // past the original lease
	if _, err := e.claim("k", long, store.HeldByOther, "an extended lease must keep the key held past the original lease"); err != nil {
		return err
	}
	if err := e.complete(a, true, "the extended claim must complete with its fence"); err != nil {
		return err
	}
	// A claim extended long after it was won must still outlive its holder:
	// expiresAt moves with the lease.
	c, err := e.claim("j", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	for range 3 {
		e.pass(e.tick / 2)
		if c, err = x.Extend(e.ctx, c, e.tick); err != nil {
			return fmt.Errorf("repeated Extend of a live claim: %w", err)
		}
	}
	return e.complete(c, true, "a claim renewed several times must complete")
}

func extendFenced(e *env) error {
	x, err := extender(e)
	if err != nil {
		return err
	}
	if _, err := x.Extend(e.ctx, store.Claim{Key: "absent", Status: store.Won, Fence: 1, Token: "t"}, long); !errors.Is(err, store.ErrFenced) {
		return violated("Extend of an absent record = %v, want ErrFenced", err)
	}
	a, err := e.claim("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick)
	b, err := e.claim("k", long, store.Won, "Claim after lapse must win")
	if err != nil {
		return err
	}
	if _, err := x.Extend(e.ctx, a, long); !errors.Is(err, store.ErrFenced) {
		return violated("Extend after a reclaim = %v, want ErrFenced", err)
	}
	if err := e.complete(b, true, "the reclaimer must complete"); err != nil {
		return err
	}
	if _, err := x.Extend(e.ctx, b, long); !errors.Is(err, store.ErrFenced) {
		return violated("Extend of a DONE record = %v, want ErrFenced", err)
	}
	c, err := e.claim("j", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.release(c, "Release by the holder"); err != nil {
		return err
	}
	if _, err := x.Extend(e.ctx, c, long); !errors.Is(err, store.ErrFenced) {
		return violated("Extend after Release = %v, want ErrFenced", err)
	}
	return nil
}

// unusualKeys are distinct keys that must map to distinct records.
func unusualKeys() []string {
	long := strings.Repeat("k", 4096)
	return []string{
		"ünïcödé-ключ-鍵-🔑",
		"a/b/c",
		"a%2Fb%2Fc",
		"../../etc/passwd",
		"with space\tand\ttab\nnewline",
		`quote'"back\slash`,
		"__reserved__",
		"projects/p/topics/t",
		"*", "?", "{hash}tag",
		long,
		long[:4095] + "j",
		"x" + long[1:],
		strings.Repeat("é", 2048),
	}
}

func unusualKeysDistinct(e *env) error {
	keys := unusualKeys()
	claims := make([]store.Claim, len(keys))
	for i, k := range keys {
		c, err := e.claim(k, long, store.Won, "each distinct unusual key must be its own record")
		if err != nil {
			return err
		}
		claims[i] = c
	}
	for i, k := range keys {
		if _, err := e.claim(k, long, store.HeldByOther, "an unusual key must stay held"); err != nil {
			return err
		}
		if err := e.complete(claims[i], true, "an unusual key must complete"); err != nil {
			return err
		}
		if _, err := e.claim(k, long, store.AlreadyDone, "an unusual key must read back DONE"); err != nil {
			return err
		}
	}
	return nil
}

func invalidKeys(e *env) error {
	for _, k := range []string{"", "nul\x00byte", "\xff\xfe not utf-8"} {
		if _, err := e.s.Claim(e.ctx, k, long, store.ClaimOptions{}); !errors.Is(err, store.ErrInvalidKey) {
			return violated("Claim(%q) = %v, want an error wrapping store.ErrInvalidKey", k, err)
		}
	}
	return nil
}

func cancelledContext(e *env) error {
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	c, err := e.s.Claim(ctx, "k", long, store.ClaimOptions{})
	if !errors.Is(err, context.Canceled) {
		return violated("Claim with a cancelled context = %v, %v; want an error wrapping context.Canceled", c.Status, err)
	}
	a, err := e.claim("k", long, store.Won, "a Claim cancelled before it ran must not hold the key")
	if err != nil {
		return err
	}
	if ok, err := e.s.Complete(ctx, a); !errors.Is(err, context.Canceled) {
		return violated("Complete with a cancelled context = %v, %v; want an error wrapping context.Canceled", ok, err)
	}
	if err := e.s.Release(ctx, a); !errors.Is(err, context.Canceled) {
		return violated("Release with a cancelled context = %v; want an error wrapping context.Canceled", err)
	}
	return e.complete(a, true, "a claim survives a cancelled Complete and Release")
}
