package storetest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/store"
)

// The Failure cases check store.Failer's rows of the transition table:
// counted failures that release, the count and reason carried across
// holders, FAILED reached by the budget or at once, what a FAILED record
// answers to every other call, Fail's retry and its fenced-out callers,
// Retry and Forget of a FAILED record, and its expiry.

var errNoFailer = errors.New("store does not implement store.Failer")

func failer(e *env) (store.Failer, store.Inspector, error) {
	f, ok := e.s.(store.Failer)
	if !ok {
		return nil, nil, errNoFailer
	}
	in, err := inspector(e)
	return f, in, err
}

// fail calls Fail and fails on error or an answer other than want.
func (e *env) failE(f store.Failer, c store.Claim, fl store.Failure, wantN int, wantFailed bool, rule string) error {
	n, failed, err := f.Fail(e.ctx, c, fl)
	if err != nil {
		return fmt.Errorf("%s: Fail error: %w", rule, err)
	}
	if n != wantN || failed != wantFailed {
		return violated("%s: Fail = %d, %v; want %d, %v", rule, n, failed, wantN, wantFailed)
	}
	return nil
}

// failuresAre checks the failures a record shows.
func failuresAre(r store.Record, attempts int, reason string, rule string) error {
	switch {
	case r.Attempts != attempts || r.Reason != reason:
		return violated("%s: Attempts %d, Reason %q; want %d, %q", rule, r.Attempts, r.Reason, attempts, reason)
	case attempts == 0 && !r.FirstFailure.IsZero():
		return violated("%s: FirstFailure = %v, want zero: no attempt failed", rule, r.FirstFailure)
	case attempts > 0 && r.FirstFailure.IsZero():
		return violated("%s: FirstFailure is zero, want the first failure's instant", rule)
	}
	return nil
}

// failCounted: failures below the budget release the key, the count and
// the last reason carry over to the next holder, and the failure that
// reaches the budget makes the record FAILED under its claim's fence.
func failCounted(e *env) error {
	f, in, err := failer(e)
	if err != nil {
		return err
	}
	budget := store.Failure{MaxAttempts: 3}
	// The longest reason, of multi-byte characters, must come back whole.
	longest := strings.Repeat("é", store.MaxReasonLen/2)
	var first store.Record
	var c store.Claim
	for i, reason := range []string{"timeout", longest} {
		if c, err = e.claimE("k", long, store.Won, "a released key must be won again"); err != nil {
			return err
		}
		budget.Reason = reason
		if err := e.failE(f, c, budget, i+1, false, "a failure below the budget"); err != nil {
			return err
		}
		r, err := e.inspect(in, "k", true, "a failed attempt keeps its record")
		if err != nil {
			return err
		}
		if i == 0 {
			first = r
		}
		switch {
		case !r.Released():
			return violated("after a failure below the budget the record must be a released claim, got %v token %q", r.State, r.Token)
		case r.Fence <= c.Fence:
			return violated("a failure below the budget releases: fence %d, want above the holder's %d", r.Fence, c.Fence)
		case !r.FirstFailure.Equal(first.FirstFailure):
			return violated("FirstFailure moved from %v to %v: it is the first failure's", first.FirstFailure, r.FirstFailure)
		}
		if err := failuresAre(r, i+1, reason, "Inspect after a failure"); err != nil {
			return err
		}
	}
	if c, err = e.claimE("k", long, store.Won, "a released key must be won again"); err != nil {
		return err
	}
	r, err := e.inspect(in, "k", true, "a claimed record")
	if err != nil {
		return err
	}
	if err := failuresAre(r, 2, longest, "a Claim of a released record must keep its failures"); err != nil {
		return err
	}
	e.pass(e.tick)
	budget.Reason = "customer gone"
	if err := e.failE(f, c, budget, 3, true, "the failure that spends the budget"); err != nil {
		return err
	}
	if err := e.failE(f, c, budget, 3, true, "a Fail retried after a lost reply must answer as the first did"); err != nil {
		return err
	}
	if r, err = e.inspect(in, "k", true, "a FAILED record"); err != nil {
		return err
	}
	switch {
	case r.State != store.Failed:
		return violated("Inspect after the budget was spent: State = %v, want FAILED", r.State)
	case r.Fence != c.Fence:
		return violated("FAILED must keep its claim's fence %d, has %d", c.Fence, r.Fence)
	case r.Token != "":
		return violated("Inspect of a FAILED record shows token %q, want none", r.Token)
	case !r.FailedAt().After(r.FirstFailure):
		return violated("FailedAt %v must come after the first failure %v", r.FailedAt(), r.FirstFailure)
	case !near(r.ExpiresAt, r.FailedAt().Add(longTTLValue)):
		return violated("a FAILED record expires a ttl after it failed: ExpiresAt %v, FailedAt %v", r.ExpiresAt, r.FailedAt())
	case r.ListState() != store.StateFailed:
		return violated("a FAILED record lists as %v, want failed", r.ListState())
	}
	if err := failuresAre(r, 3, "customer gone", "Inspect of a FAILED record"); err != nil {
		return err
	}
	got, err := e.claimE("k", long, store.AlreadyFailed, "a Claim of a FAILED record")
	if err != nil {
		return err
	}
	if got.Fence != c.Fence || got.Attempts != 3 || got.Reason != "customer gone" || got.Token != "" {
		return violated("Claim of a FAILED record = fence %d attempts %d reason %q token %q; want fence %d, 3, %q, none",
			got.Fence, got.Attempts, got.Reason, got.Token, c.Fence, "customer gone")
	}
	// Nothing the failed holder does changes a FAILED record.
	if err := e.completeE(c, false, "Complete of a FAILED record by its own claim"); err != nil {
		return err
	}
	if err := e.releaseE(c, "Release of a FAILED record"); err != nil {
		return err
	}
	if x, ok := e.s.(store.Extender); ok {
		if _, err := x.Extend(e.ctx, c, long); !errors.Is(err, store.ErrFenced) {
			return violated("Extend of a FAILED record = %v, want ErrFenced", err)
		}
	}
	after, err := e.inspect(in, "k", true, "a FAILED record")
	if err != nil {
		return err
	}
	if after.State != store.Failed || after.Fence != r.Fence || !after.LeaseUntil.Equal(r.LeaseUntil) {
		return violated("Complete, Release or Extend changed a FAILED record: %+v, was %+v", after, r)
	}
	return nil
}

// failFinal: a final failure makes the record FAILED at once, with the
// claim's origin and fingerprint; the count is one.
func failFinal(e *env) error {
	f, in, err := failer(e)
	if err != nil {
		return err
	}
	c, err := e.claimWithE(store.ClaimOptions{Fingerprint: []byte("fp-1"), Origin: "push/m-1"}, "k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.failE(f, c, store.Failure{Reason: "malformed order", Final: true, MaxAttempts: 5}, 1, true, "a final failure"); err != nil {
		return err
	}
	got, err := e.claimWithE(store.ClaimOptions{Origin: "push/m-2"}, "k", long, store.AlreadyFailed, "a Claim of a FAILED record")
	if err != nil {
		return err
	}
	if got.Origin != "push/m-1" || string(got.Fingerprint) != "fp-1" {
		return violated("AlreadyFailed must name the failed claim's origin and fingerprint: %q %q", got.Origin, got.Fingerprint)
	}
	r, err := e.inspect(in, "k", true, "a FAILED record")
	if err != nil {
		return err
	}
	if r.State != store.Failed || !r.FirstFailure.Equal(r.FailedAt()) {
		return violated("one final failure: State %v, FirstFailure %v, FailedAt %v; want FAILED, both the same instant", r.State, r.FirstFailure, r.FailedAt())
	}
	return failuresAre(r, 1, "malformed order", "Inspect after a final failure")
}

// failNotOwned: Fail by a claim that does not own a CLAIMED record changes
// nothing and answers 0, false; a claim not won and a bad reason are
// refused.
func failNotOwned(e *env) error {
	f, in, err := failer(e)
	if err != nil {
		return err
	}
	fl := store.Failure{Reason: "x", Final: true}
	old, err := e.claimE("k", e.tick, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	e.pass(e.tick)
	cur, err := e.claimE("k", long, store.Won, "a lapsed claim is taken over")
	if err != nil {
		return err
	}
	if err := e.failE(f, old, fl, 0, false, "Fail by a holder taken over"); err != nil {
		return err
	}
	if _, err := e.claimE("k", long, store.HeldByOther, "a zombie's Fail must leave the new holder's claim"); err != nil {
		return err
	}
	stolen := cur
	stolen.Token = "not-the-holders"
	if err := e.failE(f, stolen, fl, 0, false, "Fail with the holder's fence and another token"); err != nil {
		return err
	}
	if err := e.completeE(cur, true, "the holder completes"); err != nil {
		return err
	}
	if err := e.failE(f, cur, fl, 0, false, "Fail of a DONE record by the claim that completed it"); err != nil {
		return err
	}
	if r, err := e.inspect(in, "k", true, "a DONE record"); err != nil {
		return err
	} else if r.State != store.Done || r.Attempts != 0 {
		return violated("Fail changed a DONE record: %v, %d attempts", r.State, r.Attempts)
	}
	gone := store.Claim{Key: "absent", Status: store.Won, Fence: cur.Fence, Token: cur.Token}
	if err := e.failE(f, gone, fl, 0, false, "Fail of an absent record"); err != nil {
		return err
	}
	if _, err := e.inspect(in, "absent", false, "Fail must not make a record"); err != nil {
		return err
	}
	// Refused calls.
	c, err := e.claimE("r", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	held, err := e.claimE("r", long, store.HeldByOther, "the key is held")
	if err != nil {
		return err
	}
	if _, _, err := f.Fail(e.ctx, held, fl); !errors.Is(err, store.ErrNotWon) {
		return violated("Fail of a HeldByOther claim = %v, want ErrNotWon", err)
	}
	for _, bad := range []string{strings.Repeat("x", store.MaxReasonLen+1), "line\nbreak", "\xff"} {
		if _, _, err := f.Fail(e.ctx, c, store.Failure{Reason: bad, Final: true}); !errors.Is(err, store.ErrInvalidReason) {
			return violated("Fail with reason %.20q = %v, want ErrInvalidReason", bad, err)
		}
	}
	return e.completeE(c, true, "refused Fails must leave the claim to its holder")
}

// failTakeoverCounts: a lapsed holder's successor inherits the count; a
// Forget clears it.
func failTakeoverCounts(e *env) error {
	f, in, err := failer(e)
	if err != nil {
		return err
	}
	a, err := e.claimE("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.failE(f, a, store.Failure{Reason: "one", MaxAttempts: 9}, 1, false, "a counted failure"); err != nil {
		return err
	}
	if _, err := e.claimE("k", e.tick, store.Won, "the released key is won"); err != nil {
		return err
	}
	e.pass(e.tick) // that holder crashed
	c, err := e.claimE("k", long, store.Won, "a lapsed claim is taken over")
	if err != nil {
		return err
	}
	if err := e.failE(f, c, store.Failure{Reason: "two", MaxAttempts: 9}, 2, false, "a takeover's failure adds to the count"); err != nil {
		return err
	}
	x, err := inspector(e)
	if err != nil {
		return err
	}
	if ok, err := x.Forget(e.ctx, "k"); err != nil || !ok {
		return violated("Forget of a released record = %v, %v; want true", ok, err)
	}
	r, err := e.inspect(in, "k", true, "a forgotten record")
	if err != nil {
		return err
	}
	return failuresAre(r, 0, "", "Forget must clear the failures")
}

// failRetry: Retry frees a FAILED record with a higher fence and a fresh
// budget, once; it leaves every other record alone.
func failRetry(e *env) error {
	f, in, err := failer(e)
	if err != nil {
		return err
	}
	retry := func(key string, want bool, rule string) error {
		ok, err := f.Retry(e.ctx, key)
		if err != nil {
			return fmt.Errorf("%s: Retry error: %w", rule, err)
		}
		if ok != want {
			return violated("%s: Retry = %v, want %v", rule, ok, want)
		}
		return nil
	}
	if err := retry("absent", false, "Retry of an absent key"); err != nil {
		return err
	}
	if _, err := e.inspect(in, "absent", false, "Retry must not make a record"); err != nil {
		return err
	}
	a, err := e.claimE("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := retry("k", false, "Retry of a held record"); err != nil {
		return err
	}
	if err := e.failE(f, a, store.Failure{Reason: "bad", Final: true}, 1, true, "a final failure"); err != nil {
		return err
	}
	if err := retry("k", true, "Retry of a FAILED record"); err != nil {
		return err
	}
	if err := retry("k", false, "a second Retry of the same failure"); err != nil {
		return err
	}
	r, err := e.inspect(in, "k", true, "a retried record")
	if err != nil {
		return err
	}
	if !r.Released() || r.Fence <= a.Fence {
		return violated("a retried record must be a released claim above fence %d: %v fence %d token %q", a.Fence, r.State, r.Fence, r.Token)
	}
	if err := failuresAre(r, 0, "", "Retry must clear the failures"); err != nil {
		return err
	}
	if err := e.failE(f, a, store.Failure{Reason: "bad", Final: true}, 0, false, "the failed claim's Fail after a Retry"); err != nil {
		return err
	}
	b, err := e.claimE("k", long, store.Won, "a retried key must be won")
	if err != nil {
		return err
	}
	if b.Fence <= r.Fence {
		return violated("the Claim after a Retry: fence %d, want above %d", b.Fence, r.Fence)
	}
	if err := e.failE(f, b, store.Failure{Reason: "again", MaxAttempts: 2}, 1, false, "a retried key starts a fresh budget"); err != nil {
		return err
	}
	c, err := e.claimE("k", long, store.Won, "a released key must be won")
	if err != nil {
		return err
	}
	if err := e.completeE(c, true, "the work succeeds after the retry"); err != nil {
		return err
	}
	if err := retry("k", false, "Retry of a DONE record"); err != nil {
		return err
	}
	_, err = e.claimE("k", long, store.AlreadyDone, "Retry must leave a DONE record")
	return err
}

// failForget: Forget frees a FAILED record, like Retry.
func failForget(e *env) error {
	f, in, err := failer(e)
	if err != nil {
		return err
	}
	a, err := e.claimE("k", long, store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.failE(f, a, store.Failure{Reason: "bad", Final: true}, 1, true, "a final failure"); err != nil {
		return err
	}
	if ok, err := in.Forget(e.ctx, "k"); err != nil || !ok {
		return violated("Forget of a FAILED record = %v, %v; want true", ok, err)
	}
	b, err := e.claimE("k", long, store.Won, "a forgotten FAILED key must be won")
	if err != nil {
		return err
	}
	if b.Fence <= a.Fence {
		return violated("Claim after Forget of a FAILED record: fence %d, want above %d", b.Fence, a.Fence)
	}
	return nil
}

// failExpires: a FAILED record expires a ttl after it failed; the next
// Claim wins with a fresh count.
func failExpires(e *env) error {
	f, in, err := failer(e)
	if err != nil {
		return err
	}
	a, err := e.claimE("k", e.lease(), store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.failE(f, a, store.Failure{Reason: "bad", Final: true}, 1, true, "a final failure"); err != nil {
		return err
	}
	e.pass(e.tick)
	if _, err := e.inspect(in, "k", false, "an expired FAILED record is absent"); err != nil {
		return err
	}
	b, err := e.claimE("k", e.lease(), store.Won, "a Claim after a FAILED record expired must win")
	if err != nil {
		return err
	}
	if b.Fence <= a.Fence {
		return violated("Claim after expiry: fence %d, want above %d", b.Fence, a.Fence)
	}
	r, err := e.inspect(in, "k", true, "a new claim")
	if err != nil {
		return err
	}
	return failuresAre(r, 0, "", "a record won after expiry starts without failures")
}
