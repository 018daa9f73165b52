package gateway

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

// The settle context keeps the caller's values but not its cancellation
// or cause, and ends SettleTimeout after start, or at its cancel.
func TestSettleOutlivesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Second
		g := &Gateway{opts: Options{SettleTimeout: timeout}}
		parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, "v"))
		cancel(errors.New("the client went away"))
		start := time.Now()
		ctx, stop := g.settle(parent, start)
		defer stop()
		if err, cause := ctx.Err(), context.Cause(ctx); err != nil || cause != nil {
			t.Fatalf("settle context of a cancelled caller: Err %v, Cause %v; want both nil", err, cause)
		}
		if v := ctx.Value(ctxKey{}); v != "v" {
			t.Errorf("Value = %v, want the caller's value", v)
		}
		if d, ok := ctx.Deadline(); !ok || !d.Equal(start.Add(timeout)) {
			t.Errorf("Deadline = %v, %v; want SettleTimeout after start", d, ok)
		}
		time.Sleep(timeout)
		<-ctx.Done()
		if err, cause := ctx.Err(), context.Cause(ctx); err != context.DeadlineExceeded || cause != context.DeadlineExceeded {
			t.Errorf("at the deadline: Err %v, Cause %v; want DeadlineExceeded for both", err, cause)
		}
		ctx, stop = g.settle(parent, time.Now())
		stop()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("after its cancel: Err %v, want Canceled", ctx.Err())
		}
	})
}
