package storetest

import (
	"errors"
	"strings"

	"github.com/idemgate/idemgate/store"
)

// The Failure cases check store.Failer's rows of the transition table:
// counted failures that release, the count and reason carried across
// holders, FAILED reached by the budget or at once, what a FAILED record
// answers to every other call, Fail's retry and its fenced-out callers,
// Retry and Forget of a FAILED record, and its expiry.

// failer is the store's Failer; the Fail cases require one.
func (e *env) failer() store.Failer {
	f, ok := e.s.(store.Failer)
	e.expect(ok, "store does not implement store.Failer")
	return f
}

// failure calls Fail and fails on error or an answer other than want.
func (e *env) failure(f store.Failer, c store.Claim, fl store.Failure, wantN int, wantFailed bool, rule string) {
	n, failed, err := f.Fail(e.ctx, c, fl)
	e.must(err, rule+": Fail error")
	e.expect(n == wantN && failed == wantFailed, "%s: Fail = %d, %v; want %d, %v", rule, n, failed, wantN, wantFailed)
}

// failuresAre checks the failures a record shows.
func (e *env) failuresAre(r store.Record, attempts int, reason string, rule string) {
	switch {
	case r.Attempts != attempts || r.Reason != reason:
		e.fail("%s: Attempts %d, Reason %q; want %d, %q", rule, r.Attempts, r.Reason, attempts, reason)
	case attempts == 0 && !r.FirstFailure.IsZero():
		e.fail("%s: FirstFailure = %v, want zero: no attempt failed", rule, r.FirstFailure)
	case attempts > 0 && r.FirstFailure.IsZero():
		e.fail("%s: FirstFailure is zero, want the first failure's instant", rule)
	}
}

// failCounted: failures below the budget release the key, the count and
// the last reason carry over to the next holder, and the failure that
// reaches the budget makes the record FAILED under its claim's fence.
func failCounted(e *env) {
	f := e.failer()
	budget := store.Failure{MaxAttempts: 3}
	// The longest reason, of multi-byte characters, must come back whole.
	longest := strings.Repeat("é", store.MaxReasonLen/2)
	var first store.Record
	var c store.Claim
	for i, reason := range []string{"timeout", longest} {
		c = e.claim("k", long, store.Won, "a released key must be won again")
		budget.Reason = reason
		e.failure(f, c, budget, i+1, false, "a failure below the budget")
		r := e.inspect("k", true, "a failed attempt keeps its record")
		if i == 0 {
			first = r
		}
		switch {
		case !r.Released():
			e.fail("after a failure below the budget the record must be a released claim, got %v token %q", r.State, r.Token)
		case r.Fence <= c.Fence:
			e.fail("a failure below the budget releases: fence %d, want above the holder's %d", r.Fence, c.Fence)
		case !r.FirstFailure.Equal(first.FirstFailure):
			e.fail("FirstFailure moved from %v to %v: it is the first failure's", first.FirstFailure, r.FirstFailure)
		}
		e.failuresAre(r, i+1, reason, "Inspect after a failure")
	}
	c = e.claim("k", long, store.Won, "a released key must be won again")
	r := e.inspect("k", true, "a claimed record")
	e.failuresAre(r, 2, longest, "a Claim of a released record must keep its failures")
	e.pass(e.tick)
	budget.Reason = "customer gone"
	e.failure(f, c, budget, 3, true, "the failure that spends the budget")
	e.failure(f, c, budget, 3, true, "a Fail retried after a lost reply must answer as the first did")
	r = e.inspect("k", true, "a FAILED record")
	switch {
	case r.State != store.Failed:
		e.fail("Inspect after the budget was spent: State = %v, want FAILED", r.State)
	case r.Fence != c.Fence:
		e.fail("FAILED must keep its claim's fence %d, has %d", c.Fence, r.Fence)
	case r.Token != "":
		e.fail("Inspect of a FAILED record shows token %q, want none", r.Token)
	case !r.FailedAt().After(r.FirstFailure):
		e.fail("FailedAt %v must come after the first failure %v", r.FailedAt(), r.FirstFailure)
	case !near(r.ExpiresAt, r.FailedAt().Add(longTTLValue)):
		e.fail("a FAILED record expires a ttl after it failed: ExpiresAt %v, FailedAt %v", r.ExpiresAt, r.FailedAt())
	case r.ListState() != store.StateFailed:
		e.fail("a FAILED record lists as %v, want failed", r.ListState())
	}
	e.failuresAre(r, 3, "customer gone", "Inspect of a FAILED record")
	got := e.claim("k", long, store.AlreadyFailed, "a Claim of a FAILED record")
	e.expect(got.Fence == c.Fence && got.Attempts == 3 && got.Reason == "customer gone" && got.Token == "", "Claim of a FAILED record = fence %d attempts %d reason %q token %q; want fence %d, 3, %q, none",
		got.Fence, got.Attempts, got.Reason, got.Token, c.Fence, "customer gone")
	// Nothing the failed holder does changes a FAILED record.
	e.complete(c, false, "Complete of a FAILED record by its own claim")
	e.release(c, "Release of a FAILED record")
	if x, ok := e.s.(store.Extender); ok {
		e.extendFenced(x, c, "of a FAILED record")
	}
	after := e.inspect("k", true, "a FAILED record")
	e.expect(after.State == store.Failed && after.Fence == r.Fence && after.LeaseUntil.Equal(r.LeaseUntil), "Complete, Release or Extend changed a FAILED record: %+v, was %+v", after, r)
}

// failFinal: a final failure makes the record FAILED at once, with the
// claim's origin and fingerprint; the count is one.
func failFinal(e *env) {
	f := e.failer()
	c := e.claimWith(store.ClaimOptions{Fingerprint: []byte("fp-1"), Origin: "push/m-1"}, "k", long, store.Won, "first Claim must win")
	e.failure(f, c, store.Failure{Reason: "malformed order", Final: true, MaxAttempts: 5}, 1, true, "a final failure")
	got := e.claimWith(store.ClaimOptions{Origin: "push/m-2"}, "k", long, store.AlreadyFailed, "a Claim of a FAILED record")
	e.expect(got.Origin == "push/m-1" && string(got.Fingerprint) == "fp-1", "AlreadyFailed must name the failed claim's origin and fingerprint: %q %q", got.Origin, got.Fingerprint)
	r := e.inspect("k", true, "a FAILED record")
	e.expect(r.State == store.Failed && r.FirstFailure.Equal(r.FailedAt()), "one final failure: State %v, FirstFailure %v, FailedAt %v; want FAILED, both the same instant", r.State, r.FirstFailure, r.FailedAt())
	e.failuresAre(r, 1, "malformed order", "Inspect after a final failure")
}

// failNotOwned: Fail by a claim that does not own a CLAIMED record changes
// nothing and answers 0, false; a claim not won and a bad reason are
// refused.
func failNotOwned(e *env) {
	f := e.failer()
	fl := store.Failure{Reason: "x", Final: true}
	old := e.claim("k", e.tick, store.Won, "first Claim must win")
	e.pass(e.tick)
	cur := e.claim("k", long, store.Won, "a lapsed claim is taken over")
	e.failure(f, old, fl, 0, false, "Fail by a holder taken over")
	e.claim("k", long, store.HeldByOther, "a zombie's Fail must leave the new holder's claim")
	stolen := cur
	stolen.Token = "not-the-holders"
	e.failure(f, stolen, fl, 0, false, "Fail with the holder's fence and another token")
	e.complete(cur, true, "the holder completes")
	e.failure(f, cur, fl, 0, false, "Fail of a DONE record by the claim that completed it")
	r := e.inspect("k", true, "a DONE record")
	e.expect(r.State == store.Done && r.Attempts == 0, "Fail changed a DONE record: %v, %d attempts", r.State, r.Attempts)
	gone := store.Claim{Key: "absent", Status: store.Won, Fence: cur.Fence, Token: cur.Token}
	e.failure(f, gone, fl, 0, false, "Fail of an absent record")
	e.inspect("absent", false, "Fail must not make a record")
	// Refused calls.
	c := e.claim("r", long, store.Won, "first Claim must win")
	held := e.claim("r", long, store.HeldByOther, "the key is held")
	_, _, err := f.Fail(e.ctx, held, fl)
	e.expect(errors.Is(err, store.ErrNotWon), "Fail of a HeldByOther claim = %v, want ErrNotWon", err)
	for _, bad := range []string{strings.Repeat("x", store.MaxReasonLen+1), "line\nbreak", "\xff"} {
		_, _, err := f.Fail(e.ctx, c, store.Failure{Reason: bad, Final: true})
		e.expect(errors.Is(err, store.ErrInvalidReason), "Fail with reason %.20q = %v, want ErrInvalidReason", bad, err)
	}
	e.complete(c, true, "refused Fails must leave the claim to its holder")
}

// failTakeoverCounts: a lapsed holder's successor inherits the count; a
// Forget clears it.
func failTakeoverCounts(e *env) {
	f := e.failer()
	a := e.claim("k", long, store.Won, "first Claim must win")
	e.failure(f, a, store.Failure{Reason: "one", MaxAttempts: 9}, 1, false, "a counted failure")
	e.claim("k", e.tick, store.Won, "the released key is won")
	e.pass(e.tick) // that holder crashed
	c := e.claim("k", long, store.Won, "a lapsed claim is taken over")
	e.failure(f, c, store.Failure{Reason: "two", MaxAttempts: 9}, 2, false, "a takeover's failure adds to the count")
	e.forget("k", true, "Forget of a released record")
	r := e.inspect("k", true, "a forgotten record")
	e.failuresAre(r, 0, "", "Forget must clear the failures")
}

// failRetry: Retry frees a FAILED record with a higher fence and a fresh
// budget, once; it leaves every other record alone.
func failRetry(e *env) {
	f := e.failer()
	retry := func(key string, want bool, rule string) {
		ok, err := f.Retry(e.ctx, key)
		e.must(err, rule+": Retry error")
		e.expect(ok == want, "%s: Retry = %v, want %v", rule, ok, want)
	}
	retry("absent", false, "Retry of an absent key")
	e.inspect("absent", false, "Retry must not make a record")
	a := e.claim("k", long, store.Won, "first Claim must win")
	retry("k", false, "Retry of a held record")
	e.failure(f, a, store.Failure{Reason: "bad", Final: true}, 1, true, "a final failure")
	retry("k", true, "Retry of a FAILED record")
	retry("k", false, "a second Retry of the same failure")
	r := e.inspect("k", true, "a retried record")
	e.expect(r.Released() && r.Fence > a.Fence, "a retried record must be a released claim above fence %d: %v fence %d token %q", a.Fence, r.State, r.Fence, r.Token)
	e.failuresAre(r, 0, "", "Retry must clear the failures")
	e.failure(f, a, store.Failure{Reason: "bad", Final: true}, 0, false, "the failed claim's Fail after a Retry")
	b := e.claim("k", long, store.Won, "a retried key must be won")
	e.expect(b.Fence > r.Fence, "the Claim after a Retry: fence %d, want above %d", b.Fence, r.Fence)
	e.failure(f, b, store.Failure{Reason: "again", MaxAttempts: 2}, 1, false, "a retried key starts a fresh budget")
	c := e.claim("k", long, store.Won, "a released key must be won")
	e.complete(c, true, "the work succeeds after the retry")
	retry("k", false, "Retry of a DONE record")
	e.claim("k", long, store.AlreadyDone, "Retry must leave a DONE record")
}

// failForget: Forget frees a FAILED record, like Retry.
func failForget(e *env) {
	f := e.failer()
	a := e.claim("k", long, store.Won, "first Claim must win")
	e.failure(f, a, store.Failure{Reason: "bad", Final: true}, 1, true, "a final failure")
	e.forget("k", true, "Forget of a FAILED record")
	b := e.claim("k", long, store.Won, "a forgotten FAILED key must be won")
	e.expect(b.Fence > a.Fence, "Claim after Forget of a FAILED record: fence %d, want above %d", b.Fence, a.Fence)
}

// failExpires: a FAILED record expires a ttl after it failed; the next
// Claim wins with a fresh count.
func failExpires(e *env) {
	f := e.failer()
	a := e.claim("k", e.lease(), store.Won, "first Claim must win")
	e.failure(f, a, store.Failure{Reason: "bad", Final: true}, 1, true, "a final failure")
	e.pass(e.tick)
	e.inspect("k", false, "an expired FAILED record is absent")
	b := e.claim("k", e.lease(), store.Won, "a Claim after a FAILED record expired must win")
	e.expect(b.Fence > a.Fence, "Claim after expiry: fence %d, want above %d", b.Fence, a.Fence)
	r := e.inspect("k", true, "a new claim")
	e.failuresAre(r, 0, "", "a record won after expiry starts without failures")
}
