package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/internal/faultstore"
	"github.com/idemgate/idemgate/store"
)

// errGone is what a store call of a crashed process gets.
var errGone = errors.New("sim: the process is gone")

// faulty is one process's view of the shared store: it injects the faults
// of the delivery attempt whose context a call carries into the calls on
// its key, and fails every call once its process has crashed. Other calls
// (a nested Lock's) pass through, but share the process's pauses and
// crash.
//
// Its errors name the key, as a driver's error may: under HideKeys the
// gateway must not log them as they are.
type faulty struct {
	w     *world
	inner store.Store
	ext   store.Extender
	proc  *process
}

var (
	_ store.Store     = (*faulty)(nil)
	_ store.Extender  = (*faulty)(nil)
	_ store.Inspector = (*faulty)(nil)
)

// do runs call, operation o on key, under the fault the attempt in ctx
// planned for o.
func (f *faulty) do(ctx context.Context, o op, key string, call func() error) error {
	d := deliveryFrom(ctx)
	if until := f.proc.paused(); !until.IsZero() {
		if d != nil {
			// A call held up by the pause may come back past its lease,
			// as any call of a paused process: a repeat is excused.
			f.w.mu.Lock()
			d.struck = true
			ks := f.w.key(d.ms.key)
			ks.excused = true
			if d.ran { // a body that waits on the pause is paused too
				delete(ks.running, d)
				d.frozen = true
			}
			f.w.mu.Unlock()
		}
		t := time.NewTimer(time.Until(until))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s of %s while the process was paused: %w", faultstore.ErrInjected, o, key, ctx.Err())
		}
	}
	if f.proc.crashed() {
		if d != nil {
			f.w.mu.Lock()
			d.struck = true
			f.w.mu.Unlock()
		}
		return fmt.Errorf("%w: %s of %s", errGone, o, key)
	}
	if d == nil || key != d.ms.key || o >= opCount {
		return call() // a nested Lock's key: its faults are not the attempt's
	}
	flt := d.a.Faults[o]
	var fires bool
	switch {
	case flt.For > 0 && (flt.mode == faultFail || flt.mode == faultLost):
		fires = time.Since(d.start) < flt.For // every call within For
	case flt.mode == faultFail, flt.mode == faultLost, flt.mode == faultSlow, flt.mode == faultHang:
		fires = d.fire(o) // the first call only
	}
	if !fires {
		return call()
	}
	f.w.tracef(d, "store: %s %s (injected)", o, flt.mode)
	return faultstore.Inject(ctx, o, key, flt.mode, flt.Delay, call)
}

func (f *faulty) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (c store.Claim, err error) {
	d := deliveryFrom(ctx)
	if d != nil && key == d.ms.key {
		if d.a.StopAtClaim {
			f.w.stopReceive(d)
		}
		f.w.mu.Lock()
		d.forgetsAtClaim = f.w.key(key).forgetsEnded
		d.claimStopped = d.stopped
		f.w.mu.Unlock()
	}
	err = f.do(ctx, opClaim, key, func() (err error) {
		cctx, done, ok := ctx, store.Record{}, true
		// A Lock or Mutex the body takes on another key waits only while
		// renewal keeps the body's own claim.
		if d != nil && d.a.Edge == edgeClaim && (key == d.ms.key || f.w.sc.Renew) {
			if cctx, done, ok = f.edgeClaim(ctx, d, key); !ok {
				return fmt.Errorf("%w: Claim of %s: the run ended or the process died", errGone, key)
			}
		}
		at := time.Now()
		if d != nil && key == d.ms.key {
			f.w.mu.Lock()
			d.claimAt, d.retriesAtClaim = at, f.w.failures(key).retries
			f.w.mu.Unlock()
		}
		before := f.w.wonSoFar(key)
		c, err = f.inner.Claim(cctx, key, lease, opts)
		if err == nil && c.Status == store.Won {
			f.w.claimWon(d, c, before)
		}
		if err == nil && d != nil && key == d.ms.key {
			f.w.mu.Lock()
			d.failedFP = nil
			if c.Status == store.AlreadyFailed {
				d.metFailed, d.failedFP = true, c.Fingerprint
			}
			f.w.mu.Unlock()
		}
		if err == nil && f.w.b.Fake && time.Now().Equal(at) {
			f.w.checkClaimInstant(d, key, at, c, done)
		}
		return err
	})
	if err != nil {
		return store.Claim{}, err
	}
	return c, nil
}

func (f *faulty) Complete(ctx context.Context, c store.Claim) (ok bool, err error) {
	d := deliveryFrom(ctx)
	err = f.do(ctx, opComplete, c.Key, func() (err error) {
		cctx, done, alive := ctx, store.Record{}, true
		if d != nil && c.Key == d.ms.key && (d.a.Edge == edgeCompleteLease || d.a.Edge == edgeCompleteExpiry) {
			if cctx, done, alive = f.edgeComplete(ctx, d, c); !alive {
				return fmt.Errorf("%w: Complete of %s: the run ended or the process died", errGone, c.Key)
			}
		}
		at := time.Now()
		ok, err = f.inner.Complete(cctx, c)
		if err == nil && f.w.b.Fake && time.Now().Equal(at) {
			f.w.checkCompleteInstant(d, c, at, ok, done)
		}
		return err
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

func (f *faulty) Release(ctx context.Context, c store.Claim) error {
	return f.do(ctx, opRelease, c.Key, func() error { return f.inner.Release(ctx, c) })
}

func (f *faulty) Extend(ctx context.Context, c store.Claim, lease time.Duration) (nc store.Claim, err error) {
	err = f.do(ctx, opExtend, c.Key, func() (err error) {
		nc, err = f.ext.Extend(ctx, c, lease)
		return err
	})
	if err != nil {
		return store.Claim{}, err
	}
	return nc, nil
}

// Inspect and Forget reach the store without faults: the gateway reads a
// record to tell its body's own completion from a takeover, and the
// operator's Forget is the simulation's own act.
func (f *faulty) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	if f.proc.crashed() {
		return store.Record{}, false, fmt.Errorf("%w: Inspect of %s", errGone, key)
	}
	return f.w.insp.Inspect(ctx, key)
}

func (f *faulty) Forget(ctx context.Context, key string) (bool, error) {
	return f.w.insp.Forget(ctx, key)
}

// edgeClaim makes d's Claim of key land where the contract turns: it waits
// for the end of a live holder's lease (up to three renewals) or, for a copy,
// a DONE record's expiry. It returns the context to claim with, the DONE
// record waited for (zero if none), and false if the run or the process ended.
func (f *faulty) edgeClaim(ctx context.Context, d *delivery, key string) (context.Context, store.Record, bool) {
	lease := leaseOf(f.w.sc, f.w.t)
	for range 3 {
		rec, live, err := f.w.insp.Inspect(context.WithoutCancel(ctx), key)
		if err != nil || !live {
			return ctx, store.Record{}, true
		}
		now := time.Now()
		switch {
		case rec.State == store.Done && d.a.Copy && key == d.ms.key:
			f.w.tracef(d, "edge: the Claim waits for the DONE record (fence %d) to expire at %s", rec.Fence, fmtDur(rec.ExpiresAt.Sub(f.w.start)))
			if !f.w.sleep(rec.ExpiresAt.Sub(now)) || f.proc.crashed() {
				return ctx, store.Record{}, false
			}
			return context.WithoutCancel(ctx), rec, true
		case rec.State == store.Claimed && !rec.Released() && rec.LeaseUntil.After(now) && rec.LeaseUntil.Sub(now) <= lease:
			f.w.tracef(d, "edge: the Claim waits for the holder's lease (fence %d) to end at %s", rec.Fence, fmtDur(rec.LeaseUntil.Sub(f.w.start)))
			// The caller may give up meanwhile (a body whose own lease is
			// lost): the Claim then goes out on its ended context.
			if !f.w.sleepCtx(ctx, rec.LeaseUntil.Sub(now)) || f.proc.crashed() {
				return ctx, store.Record{}, false
			}
			if ctx.Err() != nil {
				return ctx, store.Record{}, true
			}
		default:
			return ctx, store.Record{}, true
		}
	}
	return ctx, store.Record{}, true
}

// edgeComplete waits, before d's Complete of c, for the end of c's lease
// (edgeCompleteLease) or, when c's record is DONE already, its expiry
// (edgeCompleteExpiry); it returns as edgeClaim does.
func (f *faulty) edgeComplete(ctx context.Context, d *delivery, c store.Claim) (context.Context, store.Record, bool) {
	rec, live, err := f.w.insp.Inspect(context.WithoutCancel(ctx), c.Key)
	if err != nil || !live || rec.Fence != c.Fence {
		return ctx, store.Record{}, true
	}
	now := time.Now()
	switch {
	case d.a.Edge == edgeCompleteLease && rec.State == store.Claimed && rec.Token == c.Token && rec.LeaseUntil.After(now):
		f.w.tracef(d, "edge: Complete waits for its lease to end at %s", fmtDur(rec.LeaseUntil.Sub(f.w.start)))
		if !f.w.sleep(rec.LeaseUntil.Sub(now)) || f.proc.crashed() {
			return ctx, store.Record{}, false
		}
		return context.WithoutCancel(ctx), store.Record{}, true
	case d.a.Edge == edgeCompleteExpiry && rec.State == store.Done:
		f.w.tracef(d, "edge: Complete, retried, waits for the DONE record to expire at %s", fmtDur(rec.ExpiresAt.Sub(f.w.start)))
		if !f.w.sleep(rec.ExpiresAt.Sub(now)) || f.proc.crashed() {
			return ctx, store.Record{}, false
		}
		return context.WithoutCancel(ctx), rec, true
	}
	return ctx, store.Record{}, true
}
