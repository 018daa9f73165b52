// Package faultstore wraps a real [store.Store] and injects faults into its
// operations, for tests of what the delivery path does when the store
// misbehaves.
//
// A fault is armed for the next call of one operation and fires once:
//
//	st := faultstore.New(mem, nil)
//	st.Arm(faultstore.Complete, faultstore.Fail) // the next Complete fails unapplied
//	st.Arm(faultstore.Claim, faultstore.Lost)    // the next Claim is applied, its reply lost
//
// Options.Delay slows every operation down, on the way to the store and on
// the way back; under testing/synctest the delay costs no real time.
// [Inject] is the injector itself, for wrappers that choose their faults
// otherwise (the simulator's store draws one per delivery attempt).
//
// The wrapper implements [store.Extender], so a gateway over it renews
// leases; Extend has no fault unless one is armed for it. Wrap a store that
// can extend (memstore does), or turn the gateway's renewal off.
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store"
)

// ErrInjected is wrapped by every error the wrapper makes up.
var ErrInjected = errors.New("faultstore: injected fault")

// Op names an operation of the store port.
type Op uint8

// The operations a fault can be armed for.
const (
	Claim Op = iota
	Complete
	Release
	Extend
	opCount
)

// String returns the operation's method name.
func (op Op) String() string {
	switch op {
	case Claim:
		return "Claim"
	case Complete:
		return "Complete"
	case Release:
		return "Release"
	case Extend:
		return "Extend"
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Mode is how a fault fires; the zero Mode is no fault.
type Mode uint8

const (
	// Fail returns an error without calling the wrapped store: the
	// operation did not happen.
	Fail Mode = iota + 1
	// Lost calls the wrapped store, then drops its reply and returns an
	// error: the operation happened, but the caller cannot know it.
	Lost
	// Slow calls the wrapped store and holds its reply back for a delay
	// (Inject's; Arm does not take it).
	Slow
	// Hang returns no reply until the caller's context ends; the operation
	// does not happen (Inject's; Arm does not take it).
	Hang
)

var modeNames = [...]string{"none", "fail", "lost", "slow", "hang"}

// String returns the mode's name, e.g. "lost".
func (m Mode) String() string { return modeNames[m] }

// Inject runs call, operation op of a store on key, with the fault mode
// (none when 0); a Slow reply comes delay late. The errors it makes up wrap
// ErrInjected and name op and key, as a driver's error may.
func Inject(ctx context.Context, op fmt.Stringer, key string, mode Mode, delay time.Duration, call func() error) error {
	switch mode {
	case Fail:
		return fmt.Errorf("%w: %s of %s failed", ErrInjected, op, key)
	case Hang:
		<-ctx.Done()
		return fmt.Errorf("%w: %s of %s hung: %w", ErrInjected, op, key, ctx.Err())
	}
	err := call()
	switch {
	case mode == Slow:
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s of %s: reply too late: %w", ErrInjected, op, key, ctx.Err())
		}
	case mode == Lost && err == nil:
		return fmt.Errorf("%w: %s of %s applied, reply lost", ErrInjected, op, key)
	}
	return err
}

// Options configures a Store. The zero value means no delay.
type Options struct {
	// Delay is added before each operation reaches the wrapped store and
	// again before its reply comes back. A context that ends meanwhile
	// ends the wait with its error (after the operation, if it was
	// applied). Default 0.
	Delay time.Duration
}

// Store is the fault-injecting wrapper. It is safe for concurrent use.
type Store struct {
	inner store.Store
	ext   store.Extender // nil when inner cannot extend
	delay time.Duration

	mu      sync.Mutex // guards the fields below
	armed   [opCount]Mode
	started [opCount]int
	ended   [opCount]int
	changed chan struct{} // closed and replaced when a call ends
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Extender = (*Store)(nil)
)

// New wraps inner. A nil opts means the defaults.
func New(inner store.Store, opts *Options) *Store {
	s := &Store{inner: inner, changed: make(chan struct{})}
	s.ext, _ = inner.(store.Extender)
	if opts != nil {
		s.delay = opts.Delay
	}
	return s
}

// Inner returns the wrapped store, for reading records back without faults.
func (s *Store) Inner() store.Store { return s.inner }

// Arm makes the next call of op fail in mode, Fail or Lost. Arming again
// replaces a fault that has not fired yet.
func (s *Store) Arm(op Op, mode Mode) {
	s.mu.Lock()
	s.armed[op] = mode
	s.mu.Unlock()
}

// Disarm drops the faults that have not fired and returns their operations.
func (s *Store) Disarm() (unfired []Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for op, m := range s.armed {
		if m != 0 {
			unfired = append(unfired, Op(op))
			s.armed[op] = 0
		}
	}
	return unfired
}

// Calls returns how many calls of op have started and how many have ended.
func (s *Store) Calls(op Op) (started, ended int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started[op], s.ended[op]
}

// AwaitEnded waits until n calls of op have ended, or ctx ends, and reports
// whether they did.
func (s *Store) AwaitEnded(ctx context.Context, op Op, n int) bool {
	for {
		s.mu.Lock()
		done, ch := s.ended[op] >= n, s.changed
		s.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// begin counts a call of op and takes its armed fault, if any.
func (s *Store) begin(op Op) Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started[op]++
	m := s.armed[op]
	s.armed[op] = 0
	return m
}

func (s *Store) end(op Op) {
	s.mu.Lock()
	s.ended[op]++
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// wait is one leg of the delay.
func (s *Store) wait(ctx context.Context) error {
	if s.delay <= 0 {
		return nil
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do runs call, operation op of the wrapped store on key, with the delay
// and the fault armed for op.
func (s *Store) do(ctx context.Context, op Op, key string, call func() error) error {
	mode := s.begin(op)
	defer s.end(op)
	if err := s.wait(ctx); err != nil {
		return err
	}
	return Inject(ctx, op, key, mode, 0, func() error {
		err := call()
		if werr := s.wait(ctx); err == nil {
			err = werr
		}
		return err
	})
}

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (c store.Claim, err error) {
	err = s.do(ctx, Claim, key, func() (err error) {
		c, err = s.inner.Claim(ctx, key, lease, opts)
		return err
	})
	if err != nil {
		return store.Claim{}, err
	}
	return c, nil
}

// Complete implements [store.Store].
func (s *Store) Complete(ctx context.Context, c store.Claim) (ok bool, err error) {
	err = s.do(ctx, Complete, c.Key, func() (err error) {
		ok, err = s.inner.Complete(ctx, c)
		return err
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, c store.Claim) error {
	return s.do(ctx, Release, c.Key, func() error { return s.inner.Release(ctx, c) })
}

// Extend implements [store.Extender]. It fails with an error that is not
// ErrFenced when the wrapped store cannot extend.
func (s *Store) Extend(ctx context.Context, c store.Claim, lease time.Duration) (nc store.Claim, err error) {
	if s.ext == nil {
		return store.Claim{}, errors.New("faultstore: the wrapped store does not implement store.Extender")
	}
	err = s.do(ctx, Extend, c.Key, func() (err error) {
		nc, err = s.ext.Extend(ctx, c, lease)
		return err
	})
	if err != nil {
		return store.Claim{}, err
	}
	return nc, nil
}
