package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
)

// errInjected is wrapped by every error a fault makes up.
var errInjected = errors.New("sim: injected store fault")

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
	if until := f.proc.paused(); !until.IsZero() {
		if d := deliveryFrom(ctx); d != nil {
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
			return fmt.Errorf("%w: %s of %s while the process was paused: %w", errInjected, o, key, ctx.Err())
		}
	}
	if f.proc.crashed() {
		if d := deliveryFrom(ctx); d != nil {
			f.w.mu.Lock()
			d.struck = true
			f.w.mu.Unlock()
		}
		return fmt.Errorf("%w: %s of %s", errGone, o, key)
	}
	d := deliveryFrom(ctx)
	if d == nil || key != d.ms.key {
		return call() // a nested Lock's key: its faults are not the attempt's
	}
	flt := d.a.Faults[o]
	fires := false
	switch flt.mode {
	case faultFail, faultLost:
		if flt.For > 0 {
			fires = time.Since(d.start) < flt.For
		} else {
			fires = d.fire(o)
		}
	case faultSlow, faultHang:
		fires = d.fire(o)
	}
	if !fires {
		return call()
	}
	f.w.tracef(d, "store: %s %s (injected)", o, flt.mode)
	switch flt.mode {
	case faultFail:
		return fmt.Errorf("%w: %s of %s failed", errInjected, o, key)
	case faultHang:
		<-ctx.Done()
		return fmt.Errorf("%w: %s of %s hung: %w", errInjected, o, key, ctx.Err())
	}
	err := call()
	if flt.mode == faultSlow {
		t := time.NewTimer(flt.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s of %s: reply too late: %w", errInjected, o, key, ctx.Err())
		}
		return err
	}
	if err == nil { // lost
		err = fmt.Errorf("%w: %s of %s applied, reply lost", errInjected, o, key)
	}
	return err
}

func (f *faulty) Claim(ctx context.Context, key string, lease time.Duration) (c store.Claim, err error) {
	if d := deliveryFrom(ctx); d != nil && key == d.ms.key {
		f.w.mu.Lock()
		d.forgetsAtClaim = f.w.key(key).forgetsEnded
		f.w.mu.Unlock()
	}
	err = f.do(ctx, opClaim, key, func() (err error) {
		c, err = f.inner.Claim(ctx, key, lease)
		if err == nil && c.Status == store.Won {
			f.w.claimWon(deliveryFrom(ctx), c)
		}
		return err
	})
	if err != nil {
		return store.Claim{}, err
	}
	return c, nil
}

func (f *faulty) Complete(ctx context.Context, c store.Claim) (ok bool, err error) {
	err = f.do(ctx, opComplete, c.Key, func() (err error) {
		ok, err = f.inner.Complete(ctx, c)
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
