package pull

import "time"

// SetHoldTimer makes the Wraps built with o wait on after, instead of a
// timer, whenever they hold a message whose key is held.
func SetHoldTimer(o *Options, after func(time.Duration) <-chan time.Time) { o.after = after }
