// Package fakeclock is a clock for tests that moves only when told to.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a fake clock, safe for concurrent use. Pass its Now to a store
// (memstore.Options.Now) and move it with Advance.
type Clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// New returns a clock set to 2030-01-01 00:00 UTC.
func New() *Clock { return &Clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
