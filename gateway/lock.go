package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Lock runs fn at most once per key while the key's record lives:
//
//   - The key is free: fn runs with the claim in its context (see
//     ClaimFromContext). nil completes the key; an error releases the
//     claim for a retry and is returned; a panic releases it and goes on.
//   - The key is done: OnDuplicate runs; Lock returns ErrDuplicate.
//   - A live holder owns it: an *InProgressError (after
//     Options.WaitForHolder, if set).
//   - Its work failed for good (the record is FAILED): a *FailedError.
//     Work that fails for good now (Permanent, Terminal, a spent
//     MaxAttempts) makes the record FAILED, and its error is returned.
//   - Its record keeps another payload's fingerprint than ctx's
//     (WithFingerprint, which fn's context no longer carries):
//     OnConflict runs; a *ConflictError.
//   - The store fails: an error wrapping ErrStore.
//
// Once fn has succeeded Lock returns nil, even when the completion cannot
// be recorded (logged at ERROR): a retry would repeat the work. A claim
// lost while fn runs cancels fn's context with cause ErrLeaseLost, which
// Lock returns instead of completing. If fn's own transaction (a store's
// CompleteTx) was fenced out (store.ErrFenced), Lock returns nil when the
// key is done, an *InProgressError when another claim holds it, and fn's
// error otherwise. docs/design.md, "The verbs", gives the reasons. With
// Options.Disabled fn runs unguarded; with HideKeys, an error for work
// that did not run holds no key.
func (g *Gateway) Lock(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	if fn == nil {
		panic("gateway: Lock with a nil function")
	}
	outcome, _, _, err := g.lock(ctx, key, fn, scope{log: g.log})
	if !outcome.ran() {
		err = g.hideKey(key, err)
	}
	return err
}

// lock is Lock, with the outcome it counted, and the fence and origin of
// the claim it met (0 and "" when none): for a duplicate, the record's,
// those of the delivery that did the work. It logs to sc.
func (g *Gateway) lock(ctx context.Context, key string, fn func(ctx context.Context) error, sc scope) (outcome Outcome, fence int64, by string, err error) {
	if g.disabled {
		return OutcomeUnguarded, 0, "", g.passThrough(ctx, "lock", key, fn)
	}
	ctx, span := g.startSpan(ctx, "idemgate.Lock", key)
	outcome = OutcomeFailed // a panic leaves it
	defer func() { g.endSpan(ctx, span, key, outcome, fence, err) }()

	c, claimedAt, err := g.claim(ctx, key, sc)
	if err == nil && c.Status == store.HeldByOther && g.opts.WaitForHolder > 0 && !conflicting(c.Fingerprint, fingerprintOf(ctx)) {
		c, claimedAt, err = g.waitForHolder(ctx, c, claimedAt, sc)
	}
	if err != nil {
		return claimOutcome(ctx, err), 0, "", err
	}
	fence, by = c.Fence, c.Origin
	if c.Status != store.Won {
		// The fingerprints first, FAILED records included: another
		// payload under the key is not the message that failed.
		if fp := fingerprintOf(ctx); conflicting(c.Fingerprint, fp) {
			g.conflict(ctx, key, c.Fingerprint, fp, sc)
			ce := &ConflictError{Key: key, Stored: c.Fingerprint, Got: fp, Done: c.Status == store.AlreadyDone,
				Failed: c.Status == store.AlreadyFailed, LeaseUntil: c.LeaseUntil}
			if !ce.Done && sc.d != nil && sc.d.AcceptConflicts {
				// Only done work may be accepted in the conflict's place:
				// a holder may yet fail and release the key, an operator
				// may retry a FAILED one; this payload is then the one to run.
				return OutcomeInProgress, fence, by, ce
			}
			return OutcomeConflict, fence, by, ce
		}
	}
	switch c.Status {
	case store.AlreadyFailed:
		// Whatever the delivery, the key's work is not run again until an
		// operator retries it.
		return OutcomeAlreadyFailed, fence, by, failedError(c)
	case store.AlreadyDone:
		g.duplicate(ctx, key, sc)
		return OutcomeDuplicate, fence, by, ErrDuplicate
	case store.HeldByOther:
		markContended(ctx)
		return OutcomeInProgress, fence, by, &InProgressError{Key: key, LeaseUntil: c.LeaseUntil, HeldBy: c.Origin}
	}
	// The body's context carries the claim, and not the route's
	// fingerprint: that belongs to the route's key, not to the keys of
	// Locks the body takes in its turn.
	bctx := ctx
	if fingerprintOf(ctx) != nil {
		bctx = WithFingerprint(ctx, nil)
	}
	r := g.renew(bctx, c, claimedAt, sc)
	defer r.end() // after Complete
	body := r.bodyCtx(bctx, c)
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			r.end()
			// A message that makes the work panic every time is poison
			// too: under a budget the attempt counts. The panic's value
			// and stack are in the guard's line, not in the reason.
			settled := false
			if count, final := g.failing(ctx, body, key, errPanicked, r.lost(), sc); count {
				_, settled = g.fail(ctx, c, errPanicked, final, sc)
			}
			if !settled {
				g.release(ctx, c, "panic", sc)
			}
		}
	}()
	err = fn(body)
	returned = true
	if err != nil && contended(body) {
		markContended(ctx) // the contention of fn's own Mutex or Lock
	}
	r.settling()
	if count, final := g.failing(ctx, body, key, err, r.lost(), sc); count {
		// The failure is counted in the record, which goes FAILED when
		// it is final or spends the budget; otherwise Fail released it.
		r.end()
		failed, settled := g.fail(ctx, c, err, final, sc)
		if !settled {
			g.release(ctx, c, "error", sc)
		}
		if failed {
			return OutcomeAbandoned, fence, by, err
		}
		return OutcomeFailed, fence, by, err
	}
	if err == nil {
		err = r.lost()
	}
	if err != nil {
		r.end()
		g.release(ctx, c, "error", sc)
		if errors.Is(err, store.ErrFenced) {
			outcome, err = g.fenced(ctx, c, err, sc)
			return outcome, fence, by, err
		}
		return OutcomeFailed, fence, by, err
	}
	// The claim stays renewed while Complete is tried: a Complete that
	// fails for longer than a lease must not let a redelivery take the
	// key over and run the work again.
	return g.complete(ctx, c, sc), fence, by, nil
}

// fenced decides, from the key's record, what becomes of a body whose
// transaction was fenced out (err matches store.ErrFenced; c is released):
// done when the record is DONE, in progress when another live claim holds
// it (that holder may yet fail), failed otherwise, since nobody else will
// do the work.
func (g *Gateway) fenced(ctx context.Context, c store.Claim, err error, sc scope) (Outcome, error) {
	rec, why := g.readAfterFence(ctx, c)
	switch {
	case rec.State == store.Done:
		sc.logAttrs(ctx, slog.LevelWarn, "idemgate: claim taken over before the work committed; nothing written, the work is done",
			g.keyAttr(c.Key), slog.Int64("fence", c.Fence), OutcomeFencedOut.attr(), g.errorAttr(c.Key, err))
		return OutcomeFencedOut, nil
	case why == "":
		// The gateway's own error, though the work ran: no key in it.
		return OutcomeInProgress, g.hideKey(c.Key, &InProgressError{Key: c.Key, LeaseUntil: rec.LeaseUntil, HeldBy: rec.Origin})
	}
	return OutcomeFailed, fmt.Errorf("%w; and no other holder has the key (%s), so the delivery is retried", err, why)
}

// readAfterFence reads c's record after its fenced-out body: rec is it
// when it is DONE, or held by a live claim other than c (why empty);
// otherwise why says what was found.
func (g *Gateway) readAfterFence(ctx context.Context, c store.Claim) (rec store.Record, why string) {
	in, ok := g.st.(reader)
	if !ok {
		return store.Record{}, "the store cannot be read to tell"
	}
	sctx, stop := g.settle(ctx, time.Now())
	rec, found, err := in.Inspect(sctx, c.Key)
	stop()
	switch {
	case err != nil:
		return store.Record{}, "the record could not be read: " + g.hideKey(c.Key, err).Error()
	case !found:
		return store.Record{}, "the record is absent"
	case rec.State == store.Done:
		return rec, ""
	case rec.Fence != c.Fence && !rec.Released() && rec.LeaseUntil.After(rec.ReadAt):
		return rec, ""
	}
	return store.Record{}, "the record is " + rec.State.String() + ", not held by another claim"
}

// reader is the part of store.Inspector the gateway uses.
type reader interface {
	Inspect(ctx context.Context, key string) (store.Record, bool, error)
}

// claimOutcome names the outcome of a failed claim: a store error, unless
// the key was refused, or the caller's context had ended (the caller went
// away; the store may well be fine).
func claimOutcome(ctx context.Context, err error) Outcome {
	switch {
	case errors.Is(err, ErrNoKey):
		return OutcomeNoKey
	case ctx.Err() != nil:
		return OutcomeCancelled
	}
	return OutcomeStoreError
}

// claim validates key and claims it for the gateway's lease, and returns
// when the Claim was sent: the lease counts from there, on the local
// monotonic clock. A claim won after that whole lease may have lapsed: it
// is released, and claim fails with ErrStore.
func (g *Gateway) claim(ctx context.Context, key string, sc scope) (store.Claim, time.Time, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Claim{}, time.Time{}, fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	start := time.Now()
	c, err := g.st.Claim(ctx, key, g.opts.Lease, claimOptions(ctx))
	g.tel.timed(ctx, opClaim, start)
	if err != nil {
		return store.Claim{}, start, fmt.Errorf("%w: claim %s: %w", ErrStore, g.keyText(key), err)
	}
	if c.Status != store.Won && c.Status != store.AlreadyDone && c.Status != store.HeldByOther && c.Status != store.AlreadyFailed {
		return store.Claim{}, start, fmt.Errorf("%w: claim %s: invalid status %d", ErrStore, g.keyText(key), c.Status)
	}
	if took := time.Since(start); c.Status == store.Won && took >= g.opts.Lease {
		g.release(ctx, c, "a late claim", sc)
		return store.Claim{}, start, fmt.Errorf("%w: claim %s: the store answered after %s, past the lease of %s: the claim may have lapsed, so the work did not start",
			ErrStore, g.keyText(key), took.Round(time.Millisecond), g.opts.Lease)
	}
	return c, start, nil
}

// complete records c as done and returns the outcome. Failures are logged,
// never returned: the work already happened. A failed Complete, which is
// idempotent, is tried again until SettleTimeout.
func (g *Gateway) complete(ctx context.Context, c store.Claim, sc scope) Outcome {
	start := time.Now()
	sctx, stop := g.settle(ctx, start)
	ok, err := g.st.Complete(sctx, c)
	tries := 1
	for wait := firstCompleteRetry; err != nil && pause(sctx, wait); wait = min(2*wait, time.Second) {
		ok, err = g.st.Complete(sctx, c)
		tries++
	}
	g.tel.timed(ctx, opComplete, start)
	stop()
	switch {
	case err != nil:
		sc.logAttrs(ctx, slog.LevelError, "idemgate: work done but not recorded as done; a redelivery may repeat it",
			g.keyAttr(c.Key), slog.Int64("fence", c.Fence), OutcomeCompleteError.attr(), slog.Int("attempts", tries), g.errorAttr(c.Key, err))
		return OutcomeCompleteError
	case !ok:
		sc.logAttrs(ctx, slog.LevelError, "idemgate: work done after the claim was taken over (lease too short?); the new holder may repeat it",
			g.keyAttr(c.Key), slog.Int64("fence", c.Fence), OutcomeFencedOut.attr())
		return OutcomeFencedOut
	case tries > 1:
		sc.logAttrs(ctx, slog.LevelWarn, "idemgate: work recorded as done after failed attempts",
			g.keyAttr(c.Key), slog.Int64("fence", c.Fence), slog.Int("attempts", tries))
	}
	return OutcomeWon
}

// waitForHolder polls c's key with Claim while a live holder owns it
// (Options.WaitForHolder), for at most half of what is left of ctx's
// deadline, and returns the last Claim's result. A poll that finds the key
// free wins it, so no two bodies ever run.
func (g *Gateway) waitForHolder(ctx context.Context, c store.Claim, claimedAt time.Time, sc scope) (store.Claim, time.Time, error) {
	end := time.Now().Add(g.opts.WaitForHolder)
	if d, ok := ctx.Deadline(); ok {
		if half := time.Now().Add(time.Until(d) / 2); half.Before(end) {
			end = half
		}
	}
	for wait := firstHolderPoll; c.Status == store.HeldByOther; wait = min(2*wait, maxHolderPoll) {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		d := min(wait, left)
		if until := time.Until(c.LeaseUntil); until > 0 && until < d {
			d = until // the holder's lease ends first: the poll takes the key over
		}
		if !pause(ctx, d) {
			break // the caller is gone: answered in progress, as without a wait
		}
		next, at, err := g.claim(ctx, c.Key, sc)
		if err != nil {
			return store.Claim{}, at, err
		}
		c, claimedAt = next, at
		if conflicting(c.Fingerprint, fingerprintOf(ctx)) {
			break // another payload holds the key now: Lock's conflict
		}
	}
	return c, claimedAt, nil
}

// The pauses of waitForHolder: the first, doubled after each poll up to
// the last.
const (
	firstHolderPoll = 25 * time.Millisecond
	maxHolderPoll   = 500 * time.Millisecond
)

// firstCompleteRetry is the pause before Complete is tried again; each
// later pause doubles, up to a second.
const firstCompleteRetry = 50 * time.Millisecond

// pause waits d, and reports false, at once, if ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// release gives c up so that a retry can run. Failures are logged: the
// lease still frees the key in time.
func (g *Gateway) release(ctx context.Context, c store.Claim, why string, sc scope) {
	start := time.Now()
	sctx, stop := g.settle(ctx, start)
	err := g.st.Release(sctx, c)
	g.tel.timed(ctx, opRelease, start)
	stop()
	if err != nil {
		sc.logAttrs(ctx, slog.LevelWarn, "idemgate: release failed; the key frees when its lease ends",
			g.keyAttr(c.Key), slog.Int64("fence", c.Fence), slog.String("after", why), slog.Time("lease_until", c.LeaseUntil), g.errorAttr(c.Key, err))
	}
}

// duplicate runs the OnDuplicate hook, isolated from the caller.
func (g *Gateway) duplicate(ctx context.Context, key string, sc scope) {
	if h := g.opts.OnDuplicate; h != nil {
		g.observe(ctx, "OnDuplicate", key, sc, func() { h(ctx, key) })
	}
}

// conflict runs the OnConflict hook, isolated from the caller.
func (g *Gateway) conflict(ctx context.Context, key string, stored, got []byte, sc scope) {
	if h := g.opts.OnConflict; h != nil {
		g.observe(ctx, "OnConflict", key, sc, func() { h(ctx, key, stored, got) })
	}
}

// observe calls an observer hook: a panic in it is logged and ignored, and
// it cannot change the outcome.
func (g *Gateway) observe(ctx context.Context, name, key string, sc scope, call func()) {
	defer func() {
		if r := recover(); r != nil {
			sc.logAttrs(ctx, slog.LevelError, "idemgate: "+name+" hook panicked; ignored", g.keyAttr(key), slog.Any("panic", r))
		}
	}()
	call()
}

// passThrough runs fn unguarded (the Disabled switch).
func (g *Gateway) passThrough(ctx context.Context, verb, key string, fn func(context.Context) error) error {
	g.log.LogAttrs(ctx, slog.LevelWarn, "idemgate: guard disabled; running unguarded",
		slog.String("verb", verb), g.keyAttr(key), OutcomeUnguarded.attr())
	g.tel.outcome(ctx, OutcomeUnguarded)
	return fn(ctx)
}
