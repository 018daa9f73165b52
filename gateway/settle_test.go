package gateway

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

func TestSettleCtx(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	cancel()
	c := newSettleCtx(parent, time.Now().Add(30*time.Millisecond))
	defer c.stop()
	if c.Err() != nil {
		t.Fatal("a settle context must ignore the parent's cancellation")
	}
	if c.Value(ctxKey{}) != "v" {
		t.Fatal("a settle context must carry the parent's values")
	}
	if d, ok := c.Deadline(); !ok || time.Until(d) > 30*time.Millisecond {
		t.Fatalf("Deadline = %v, %v", d, ok)
	}
	// A child context sees the deadline through Done.
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	<-child.Done()
	if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("after the deadline: Err = %v, child Err = %v; want DeadlineExceeded", c.Err(), child.Err())
	}
}

func TestSettleCtxErrWithoutDone(t *testing.T) {
	c := newSettleCtx(context.Background(), time.Now().Add(-time.Second))
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err past the deadline = %v", c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done past the deadline must be closed")
	}
}
