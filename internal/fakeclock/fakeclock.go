// Package fakeclock is a clock for tests that moves only when told to.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a fake clock, safe for concurrent use. Pass its Now to a store
// (memstore.Options.Now) and move it with Advance.
type Clock struct {
	mu   sync.Mutex // guards t
	t    time.Time
	step time.Duration // added after each reading
}

// New returns a clock set to 2030-01-01 00:00 UTC.
func New() *Clock { return At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) }

// At returns a clock set to t.
func At(t time.Time) *Clock { return &Clock{t: t} }

// Stepping returns a clock set to t that moves forward by step after each
// reading, so that every reading is an instant of its own.
func Stepping(t time.Time, step time.Duration) *Clock { return &Clock{t: t, step: step} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
