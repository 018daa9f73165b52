package gateway

import (
	"context"
	"time"
)

// settle returns the context Complete, Release and Fail run on: ctx's
// values without its cancellation, ending SettleTimeout after start, so
// that a cancelled request still settles its claim and a hung store cannot
// hold the caller. WithoutCancel also keeps context.Cause from finding the
// caller's cause.
func (g *Gateway) settle(ctx context.Context, start time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.WithoutCancel(ctx), start.Add(g.opts.SettleTimeout))
}
