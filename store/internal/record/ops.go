package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Decide gets the record read (nil when absent) and the time of the read,
// and returns the record to write, or nil to write nothing.
type Decide func(cur *Record, now time.Time) *Record

// Round is one attempt at an atomic read-modify-write of key's record: it
// reads, calls decide, and writes decide's record on the condition that
// nobody wrote in between (a transaction, or a precondition). attempt
// counts from 1: a store may read differently when retrying after
// contention.
type Round func(ctx context.Context, key string, attempt int, decide Decide) error

const (
	maxAttempts = 5                      // rounds per operation
	backoffBase = 10 * time.Millisecond  // first pause: about 10, 20, 40, 80 ms
	backoffMax  = 500 * time.Millisecond // longest pause
)

// Ops implements store.Store and store.Extender over a Round: it checks
// the arguments, applies the Rules, and retries rounds that failed in a way
// that may be transient, up to five in all with a jittered backoff. Every
// round re-reads the record and a Claim keeps its token across rounds, so
// a round whose write landed unseen is recognised by the next one.
type Ops struct {
	Name  string // the store's package name, for errors
	Rules Rules
	Round Round
	// Retryable classifies a failed round: retry says another round may
	// succeed; now says to run it without a pause (the record moved on
	// under a precondition).
	Retryable func(err error) (retry, now bool)
}

// Claim implements store.Store.
func (o *Ops) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	if err := store.CheckKey(key); err != nil {
		return store.Claim{}, err
	}
	if lease <= 0 {
		return store.Claim{}, fmt.Errorf("%s: lease %v is not positive", o.Name, lease)
	}
	if err := store.CheckLease(lease, o.Rules.TTL); err != nil {
		return store.Claim{}, fmt.Errorf("%s: Claim: %w", o.Name, err)
	}
	opts, err := opts.Checked()
	if err != nil {
		return store.Claim{}, err
	}
	fp, origin := bytes.Clone(opts.Fingerprint), opts.Origin // the record must not share the caller's array
	token := opts.ClaimToken()                               // once per call: every round reuses it
	sameToken := func() string { return token }
	var c store.Claim
	err = o.update(ctx, "Claim", key, func(cur *Record, now time.Time) *Record {
		var (
			next  Record
			write bool
		)
		c, next, write = o.Rules.Claim(cur, key, sameToken, fp, origin, lease, now)
		return written(next, write)
	})
	if err != nil {
		return store.Claim{}, err
	}
	return c, nil
}

// Complete implements store.Store.
func (o *Ops) Complete(ctx context.Context, c store.Claim) (bool, error) {
	if err := store.CheckWon(c); err != nil {
		return false, fmt.Errorf("%s: Complete: %w", o.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if store.CheckKey(c.Key) != nil {
		return false, nil // no such record can exist
	}
	var ok bool
	err := o.update(ctx, "Complete", c.Key, func(cur *Record, now time.Time) *Record {
		var (
			next  Record
			write bool
		)
		ok, next, write = o.Rules.Complete(cur, c, now)
		return written(next, write)
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// Release implements store.Store.
func (o *Ops) Release(ctx context.Context, c store.Claim) error {
	if err := store.CheckWon(c); err != nil {
		return fmt.Errorf("%s: Release: %w", o.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if store.CheckKey(c.Key) != nil {
		return nil
	}
	return o.update(ctx, "Release", c.Key, func(cur *Record, now time.Time) *Record {
		return written(o.Rules.Release(cur, c, now))
	})
}

// Fail implements store.Failer.
func (o *Ops) Fail(ctx context.Context, c store.Claim, f store.Failure) (int, bool, error) {
	if err := store.CheckWon(c); err != nil {
		return 0, false, fmt.Errorf("%s: Fail: %w", o.Name, err)
	}
	if err := store.CheckReason(f.Reason); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if store.CheckKey(c.Key) != nil {
		return 0, false, nil
	}
	var (
		attempts int
		failed   bool
	)
	err := o.update(ctx, "Fail", c.Key, func(cur *Record, now time.Time) *Record {
		var (
			next  Record
			write bool
		)
		attempts, failed, next, write = o.Rules.Fail(cur, c, f, now)
		return written(next, write)
	})
	if err != nil {
		return 0, false, err
	}
	return attempts, failed, nil
}

// Retry implements store.Failer.
func (o *Ops) Retry(ctx context.Context, key string) (bool, error) {
	return o.free(ctx, "Retry", key, o.Rules.Retry)
}

// Extend implements store.Extender.
func (o *Ops) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	if err := store.CheckWon(c); err != nil {
		return store.Claim{}, fmt.Errorf("%s: Extend: %w", o.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	if lease <= 0 {
		return store.Claim{}, fmt.Errorf("%s: lease %v is not positive", o.Name, lease)
	}
	if store.CheckKey(c.Key) != nil {
		return store.Claim{}, store.ErrFenced
	}
	var (
		out    store.Claim
		fenced error
	)
	err := o.update(ctx, "Extend", c.Key, func(cur *Record, now time.Time) *Record {
		var next Record
		out, next, fenced = o.Rules.Extend(cur, c, lease, now)
		return written(next, fenced == nil)
	})
	if err != nil {
		return store.Claim{}, err
	}
	if fenced != nil {
		return store.Claim{}, fenced
	}
	return out, nil
}

// Step is one read-modify-write of key's record inside a transaction the
// caller owns: it reads the record, calls decide, and queues decide's
// record for the caller's commit. It neither commits nor retries.
type Step func(key string, decide Decide) error

// CompleteTx decides a Complete inside the caller's transaction through
// step, after store.EnterTx(c). It returns nil when c owns a CLAIMED record
// (queued as DONE); an error matching store.ErrFenced when it does not, or
// when the record is DONE already under c's fence; store.ErrNotWon for a
// claim not won (nothing read); step's error otherwise. A failed
// transaction is the caller's to retry, on a fresh read.
func (o *Ops) CompleteTx(c store.Claim, step Step) error {
	if err := store.CheckWon(c); err != nil {
		return fmt.Errorf("%s: CompleteTx: %w", o.Name, err)
	}
	store.EnterTx(c)
	var (
		out TxOutcome
		err error
	)
	if store.CheckKey(c.Key) == nil { // else no record can exist
		err = step(c.Key, func(cur *Record, now time.Time) *Record {
			var next Record
			out, next = o.Rules.CompleteTx(cur, c, now)
			return written(next, out == TxCompleted)
		})
	}
	switch {
	case err != nil:
		return fmt.Errorf("%s: CompleteTx %s: %w", o.Name, store.QuoteKey(c.Key), err)
	case out == TxDoneAlready:
		return fmt.Errorf("%s: CompleteTx %s: the record is DONE already under fence %d: this transaction must not commit its effects a second time: %w", o.Name, store.QuoteKey(c.Key), c.Fence, store.ErrFenced)
	case out != TxCompleted:
		return fmt.Errorf("%s: CompleteTx %s: fence %d no longer owns the record: %w", o.Name, store.QuoteKey(c.Key), c.Fence, store.ErrFenced)
	}
	return nil
}

// written is what a Decide returns for a rule's verdict: next when the
// rule writes, nil when it does not.
func written(next Record, write bool) *Record {
	if !write {
		return nil
	}
	return &next
}

// update runs rounds until one succeeds, one fails for good, or the
// attempts run out. decide must be a function of its inputs: the results it
// reports from the last round are the ones that count.
func (o *Ops) update(ctx context.Context, op, key string, decide Decide) error {
	for attempt := 1; ; attempt++ {
		err := o.Round(ctx, key, attempt, decide)
		if err == nil {
			return nil
		}
		retry, now := o.Retryable(err)
		switch {
		case ctx.Err() != nil || !retry:
			return o.fail(ctx, op, key, err)
		case attempt == maxAttempts:
			return o.fail(ctx, op, key, fmt.Errorf("gave up after %d attempts: %w", attempt, err))
		case now:
			continue
		}
		if pause(ctx, attempt) != nil {
			return o.fail(ctx, op, key, err)
		}
	}
}

// pause waits a jittered, growing delay before attempt+1.
func pause(ctx context.Context, attempt int) error {
	d := min(backoffBase<<(attempt-1), backoffMax)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fail wraps err for the caller. When ctx has ended, its error is wrapped
// too, so that errors.Is(err, context.Canceled) holds even when the RPC
// reported the cancellation as a gRPC status.
func (o *Ops) fail(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("%s: %s %s: %w", o.Name, op, store.QuoteKey(key), err)
}
