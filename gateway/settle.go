package gateway

import (
	"context"
	"sync"
	"time"
)

// settleCtx is the context Complete and Release run on: the caller's values
// without its cancellation, ending at a deadline, so that a cancelled
// request still settles its claim and a hung store cannot hold the caller.
//
// It behaves as context.WithTimeout(context.WithoutCancel(parent), d), with
// stop as its cancel function (TestSettleCtxMatchesStdlib holds it to
// that), but starts the timer behind Done only when somebody asks for Done
// or derives a context from it. Network clients do; an in-process store
// only checks Err, and then settling costs two allocations instead of five
// (BenchmarkSettleCtx).
//
// Children cost no goroutine: context.WithCancel and its kin, given a
// parent that is not one of theirs, watch it from a goroutine of their own
// unless it has an AfterFunc method, which settleCtx has.
type settleCtx struct {
	values   context.Context // context.WithoutCancel(parent), for Value
	deadline time.Time

	mu    sync.Mutex // guards the fields below
	err   error      // why it ended: DeadlineExceeded, or Canceled by stop
	done  chan struct{}
	timer *time.Timer // closes done at the deadline, once Done was asked for
	funcs []*func()   // called when it ends: see AfterFunc
}

func newSettleCtx(parent context.Context, deadline time.Time) *settleCtx {
	// WithoutCancel also makes context.Cause fall back to Err: Cause looks
	// for the nearest standard cancellable context through Value, and must
	// not find the caller's.
	return &settleCtx{values: context.WithoutCancel(parent), deadline: deadline}
}

func (c *settleCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *settleCtx) Value(key any) any { return c.values.Value(key) }

func (c *settleCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watch()
	return c.done
}

func (c *settleCtx) Err() error {
	c.mu.Lock()
	if c.err == nil && !time.Now().Before(c.deadline) {
		c.end(context.DeadlineExceeded) // unlocks
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc arranges to call f once c ends, and returns a function that
// cancels the call, reporting whether it did. The context package uses it
// to propagate the end to children without a goroutine each.
func (c *settleCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.watch()
	p := &f
	c.funcs = append(c.funcs, p)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, q := range c.funcs {
			if q == p {
				c.funcs = append(c.funcs[:i], c.funcs[i+1:]...)
				return true
			}
		}
		return false
	}
}

// watch makes done and starts the timer that closes it, once. Called with
// c.mu held.
func (c *settleCtx) watch() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	if c.err != nil {
		close(c.done)
		return
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), c.expire)
}

func (c *settleCtx) expire() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.end(context.DeadlineExceeded)
}

// stop ends c, as the cancel function of context.WithTimeout does: it
// releases the timer, and a c that had not yet expired reports Canceled.
func (c *settleCtx) stop() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.end(context.Canceled)
}

// end records err, closes done and calls the AfterFunc functions. Called
// with c.mu held, which it unlocks: the functions may call back into c.
func (c *settleCtx) end(err error) {
	c.err = err
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.done != nil {
		close(c.done)
	}
	funcs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for _, f := range funcs {
		(*f)()
	}
}
