package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store"
)

type testCase struct {
	name string
	ttl  ttlKind
	fn   func(e *env)
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

func claimAbsentWins(e *env) {
	before := e.now()
	c := e.claim("k", long, store.Won, "Claim of an absent key must win")
	e.expect(c.Fence > 0, "Claim of an absent key: fence = %d, want a positive fence", c.Fence)
	e.expect(c.Token != "", "a winning Claim must carry a token")
	if !e.real && !c.LeaseUntil.Equal(before.Add(long)) {
		e.fail("Won LeaseUntil = %v, want now+lease = %v", c.LeaseUntil, before.Add(long))
	}
	if e.real && time.Until(c.LeaseUntil) < long-time.Minute {
		e.fail("Won LeaseUntil = %v, want about an hour from now", c.LeaseUntil)
	}
	other := e.claim("k2", long, store.Won, "Claim of another absent key must win")
	e.expect(other.Token != c.Token, "two Claim calls must get different tokens")
}

func claimWhileHeld(e *env) {
	c := e.claim("k", long, store.Won, "first Claim must win")
	h := e.claim("k", long, store.HeldByOther, "Claim while the lease is live must report HeldByOther")
	e.fenceIs(h, c.Fence, "HeldByOther must not change the fence")
	if d := h.LeaseUntil.Sub(c.LeaseUntil).Abs(); d > time.Millisecond {
		e.fail("HeldByOther LeaseUntil = %v, want the holder's %v", h.LeaseUntil, c.LeaseUntil)
	}
	e.expect(h.Token == "", "HeldByOther must not reveal the holder's token")
	// The holder is unaffected: it still completes.
	e.complete(c, true, "the holder must complete after a HeldByOther")
}

func concurrentClaims(e *env) {
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
		e.must(errs[i], "concurrent Claim")
		switch res[i].Status {
		case store.Won:
			wins++
		case store.HeldByOther:
		default:
			e.fail("concurrent Claim = %v, want Won or HeldByOther", res[i].Status)
		}
	}
	e.expect(wins == 1, "%d concurrent Claims on one key: %d won, want exactly 1 (claim must be atomic)", n, wins)
}

func crashedHolderReclaimed(e *env) {
	a := e.claim("k", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick) // a never completes nor releases: it crashed
	b := e.claim("k", long, store.Won, "Claim after the holder's lease lapsed must win")
	e.expect(b.Fence > a.Fence, "a reclaim must raise the fence: fence = %d, want above %d", b.Fence, a.Fence)
	e.expect(b.Token != a.Token, "a reclaim must carry the new caller's token")
	e.claim("k", long, store.HeldByOther, "the reclaimer must hold the key")
}

func zombieFencedOut(e *env) {
	zombie := e.claim("k", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	b := e.claim("k", long, store.Won, "Claim after lapse must win")
	e.complete(zombie, false, "Complete by a zombie after a reclaim must return false")
	e.release(zombie, "Release by a zombie after a reclaim must be a no-op")
	e.claim("k", long, store.HeldByOther, "a zombie's Release must not free its successor's key")
	e.complete(b, true, "the successor must still complete after the zombie's attempts")
	e.complete(zombie, false, "Complete by a zombie must return false on its successor's DONE record")
	e.claim("k", long, store.AlreadyDone, "the successor's DONE must stand")
}

func lateCompleteCommits(e *env) {
	a := e.claim("k", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick) // the work outran its lease, but nobody reclaimed
	e.complete(a, true, "Complete after the lease lapsed must commit when nobody reclaimed (no lease check)")
	e.claim("k", long, store.AlreadyDone, "a late Complete must leave the key DONE")
}

func completeThenDuplicate(e *env) {
	a := e.claim("k", long, store.Won, "first Claim must win")
	e.complete(a, true, "Complete by the holder must return true")
	e.complete(a, true, "a retried Complete on DONE must return true")
	d := e.claim("k", long, store.AlreadyDone, "Claim of a DONE key must report AlreadyDone")
	e.fenceIs(d, a.Fence, "AlreadyDone must not change the fence")
	e.release(a, "Release of a DONE record must be a no-op")
	e.claim("k", long, store.AlreadyDone, "Release must not undo DONE")
}

func completeStaleOrAbsent(e *env) {
	e.complete(store.Claim{Key: "absent", Status: store.Won, Fence: 1, Token: "t"}, false, "Complete of an absent record must return false")
	a := e.claim("k", long, store.Won, "first Claim must win")
	stale := a
	stale.Fence = a.Fence + 5
	e.complete(stale, false, "Complete with a fence that does not match must return false")
	e.claim("k", long, store.HeldByOther, "a refused Complete must leave the claim in place")
	e.complete(a, true, "the holder must complete")
	e.complete(stale, false, "Complete with a wrong fence on a DONE record must return false")
}

func releaseThenReclaim(e *env) {
	a := e.claim("k", long, store.Won, "first Claim must win")
	e.release(a, "Release by the holder")
	e.complete(a, false, "a released claim must never complete (Release bumps the fence)")
	b := e.claim("k", long, store.Won, "Claim right after Release must win without waiting for the lease")
	e.expect(b.Fence >= a.Fence+2, "Release then reclaim must raise the fence twice: fence = %d, want at least %d", b.Fence, a.Fence+2)
	e.release(a, "a second Release of the old claim must be a no-op")
	e.claim("k", long, store.HeldByOther, "an old claim's Release must not free the new holder")
	e.complete(b, true, "the new holder must complete")
}

func releaseIgnored(e *env) {
	e.release(store.Claim{Key: "absent", Status: store.Won, Fence: 1, Token: "t"}, "Release of an absent record must be a no-op")
}

func ttlExpiryReclaims(e *env) {
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	e.complete(a, true, "the holder must complete")
	e.pass(e.tick) // the ttl
	b := e.claim("k", e.lease(), store.Won, "Claim after a DONE record's ttl must win")
	if b.Fence <= a.Fence {
		// A store may have deleted the expired record (fence restarts at 1)
		// only if it is gone for good; the record was DONE and outlived every
		// holder, so rising is what we require here.
		e.fail("Claim after ttl expiry: fence = %d, want > %d (the fence must never go back while the record exists)", b.Fence, a.Fence)
	}
	e.complete(a, false, "the expired holder must not complete over the new claim")
}

func retriedClaimReaffirms(e *env) {
	opts := store.ClaimOptions{Token: "retry-token-1"}
	a := e.claimWith(opts, "k", long, store.Won, "Claim with a fixed token")
	e.expect(a.Token == "retry-token-1", "Claim Token = %q, want the one from ClaimOptions.Token", a.Token)
	b := e.claimWith(opts, "k", long, store.Won, "a retried Claim with the same token must re-affirm")
	e.fenceIs(b, a.Fence, "a retried Claim with the same token must re-affirm")
	e.claim("k", long, store.HeldByOther, "another token must still see HeldByOther")
	// The reclaim path: a lapsed claim, reclaimed with a fixed token, retried.
	c := e.claim("j", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	opts2 := store.ClaimOptions{Token: "retry-token-2"}
	d1 := e.claimWith(opts2, "j", long, store.Won, "a reclaim with a fixed token")
	e.expect(d1.Fence > c.Fence, "reclaim: fence %d, want above %d", d1.Fence, c.Fence)
	d2 := e.claimWith(opts2, "j", long, store.Won, "a retried reclaim must re-affirm")
	e.fenceIs(d2, d1.Fence, "a retried reclaim must re-affirm (no double bump)")
	e.complete(d2, true, "the re-affirmed claim must complete")
}

// releasedTokenNotReaffirmed: a Claim that reuses the token of a released
// claim must win anew (the release abandoned that claim), never re-affirm it
// with the lapsed lease the release left behind.
func releasedTokenNotReaffirmed(e *env) {
	opts := store.ClaimOptions{Token: "released-token"}
	a := e.claimWith(opts, "k", long, store.Won, "Claim with a fixed token")
	e.release(a, "Release by the holder")
	b := e.claimWith(opts, "k", long, store.Won, "Claim reusing a released token")
	e.expect(b.Fence >= a.Fence+2, "a Claim reusing a released claim's token must take the key anew (a fence raised twice, at least %d), not re-affirm the released claim: fence = %d", a.Fence+2, b.Fence)
	if time.Until(b.LeaseUntil) < long-time.Minute && e.real || !e.real && !b.LeaseUntil.Equal(e.now().Add(long)) {
		e.fail("Claim reusing a released token: LeaseUntil = %v, want a fresh lease", b.LeaseUntil)
	}
	e.claim("k", long, store.HeldByOther, "the new claim must hold the key")
}

// extender is the store's Extender; the suite requires one.
func (e *env) extender() store.Extender {
	x, ok := e.s.(store.Extender)
	e.expect(ok, "store does not implement store.Extender")
	return x
}

// extendFenced fails unless Extend of c fails with store.ErrFenced.
func (e *env) extendFenced(x store.Extender, c store.Claim, what string) {
	_, err := x.Extend(e.ctx, c, long)
	e.expect(errors.Is(err, store.ErrFenced), "Extend %s = %v, want store.ErrFenced", what, err)
}

func extend(e *env) {
	x := e.extender()
	a := e.claim("k", e.tick, store.Won, "first Claim must win")
	b, err := x.Extend(e.ctx, a, long)
	e.must(err, "Extend of a live claim")
	e.expect(b.Fence == a.Fence && b.Token == a.Token && b.Status == store.Won && b.Key == a.Key, "Extend returned %+v, want the same claim with a later lease", b)
	e.expect(b.LeaseUntil.After(a.LeaseUntil), "Extend LeaseUntil = %v, want after %v", b.LeaseUntil, a.LeaseUntil)
	e.pass(e.tick) // past the original lease
	e.claim("k", long, store.HeldByOther, "an extended lease must keep the key held past the original lease")
	e.complete(a, true, "the extended claim must complete with its fence")
	// A claim extended long after it was won must still outlive its holder:
	// expiresAt moves with the lease.
	c := e.claim("j", e.tick, store.Won, "first Claim must win")
	for range 3 {
		e.pass(e.tick / 2)
		c, err = x.Extend(e.ctx, c, e.tick)
		e.must(err, "repeated Extend of a live claim")
	}
	e.complete(c, true, "a claim renewed several times must complete")
}

func extendFenced(e *env) {
	x := e.extender()
	e.extendFenced(x, store.Claim{Key: "absent", Status: store.Won, Fence: 1, Token: "t"}, "of an absent record")
	a := e.claim("k", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	b := e.claim("k", long, store.Won, "Claim after lapse must win")
	e.extendFenced(x, a, "after a reclaim")
	e.complete(b, true, "the reclaimer must complete")
	e.extendFenced(x, b, "of a DONE record")
	c := e.claim("j", long, store.Won, "first Claim must win")
	e.release(c, "Release by the holder")
	e.extendFenced(x, c, "after Release")
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

func unusualKeysDistinct(e *env) {
	keys := unusualKeys()
	claims := make([]store.Claim, len(keys))
	for i, k := range keys {
		claims[i] = e.claim(k, long, store.Won, "each distinct unusual key must be its own record")
	}
	for i, k := range keys {
		e.claim(k, long, store.HeldByOther, "an unusual key must stay held")
		e.complete(claims[i], true, "an unusual key must complete")
		e.claim(k, long, store.AlreadyDone, "an unusual key must read back DONE")
	}
}

func invalidKeys(e *env) {
	for _, k := range []string{"", "nul\x00byte", "\xff\xfe not utf-8"} {
		_, err := e.s.Claim(e.ctx, k, long, store.ClaimOptions{})
		e.expect(errors.Is(err, store.ErrInvalidKey), "Claim(%q) = %v, want an error wrapping store.ErrInvalidKey", k, err)
	}
}

func cancelledContext(e *env) {
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	c, err := e.s.Claim(ctx, "k", long, store.ClaimOptions{})
	e.expect(errors.Is(err, context.Canceled), "Claim with a cancelled context = %v, %v; want an error wrapping context.Canceled", c.Status, err)
	a := e.claim("k", long, store.Won, "a Claim cancelled before it ran must not hold the key")
	ok, err := e.s.Complete(ctx, a)
	e.expect(errors.Is(err, context.Canceled), "Complete with a cancelled context = %v, %v; want an error wrapping context.Canceled", ok, err)
	err = e.s.Release(ctx, a)
	e.expect(errors.Is(err, context.Canceled), "Release with a cancelled context = %v; want an error wrapping context.Canceled", err)
	e.complete(a, true, "a claim survives a cancelled Complete and Release")
}
