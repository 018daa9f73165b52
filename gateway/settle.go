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
// It behaves as context.WithTimeout(context.WithoutCancel(parent), d) but
// starts the timer behind Done only when somebody asks for Done. Network
// clients do; an in-process store only checks Err, and then settling costs
// one allocation instead of four.
type settleCtx struct {
	parent   context.Context // for Value only
	deadline time.Time

	mu    sync.Mutex // guards done and timer
	done  chan struct{}
	timer *time.Timer
}

func newSettleCtx(parent context.Context, deadline time.Time) *settleCtx {
	return &settleCtx{parent: parent, deadline: deadline}
}

func (c *settleCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *settleCtx) Value(key any) any { return c.parent.Value(key) }

func (c *settleCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if d := time.Until(c.deadline); d <= 0 {
			close(c.done)
		} else {
			c.timer = time.AfterFunc(d, func() { close(c.done) })
		}
	}
	return c.done
}

func (c *settleCtx) Err() error {
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	if done != nil {
		select {
		case <-done:
			return context.DeadlineExceeded
		default:
			return nil
		}
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// stop releases the timer, if one was started.
func (c *settleCtx) stop() {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
}
