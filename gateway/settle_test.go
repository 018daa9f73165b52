package gateway

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

// observed is what a context shows at one moment, with a child derived from
// it before that moment.
type observed struct {
	err, cause              error
	deadline                time.Time
	hasDeadline, done       bool
	value, missing          any
	childErr, childCause    error
	childDone, afterFuncRan bool
}

func (o observed) String() string {
	return fmt.Sprintf("Err %v, Cause %v, Deadline %v %v, Done %v, Value %v %v; child: Err %v, Cause %v, Done %v; AfterFunc ran %v",
		o.err, o.cause, o.deadline, o.hasDeadline, o.done, o.value, o.missing,
		o.childErr, o.childCause, o.childDone, o.afterFuncRan)
}

// watched is a context with a child and an AfterFunc registered on it.
type watched struct {
	ctx   context.Context
	child context.Context
	ran   chan struct{}
}

func watch(t *testing.T, ctx context.Context) watched {
	child, cancel := context.WithCancelCause(ctx)
	t.Cleanup(func() { cancel(nil) })
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })
	return watched{ctx, child, ran}
}

func closed[T any](c <-chan T) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (w watched) observe() observed {
	d, ok := w.ctx.Deadline()
	return observed{
		err: w.ctx.Err(), cause: context.Cause(w.ctx),
		deadline: d, hasDeadline: ok, done: closed(w.ctx.Done()),
		value: w.ctx.Value(ctxKey{}), missing: w.ctx.Value("missing"),
		childErr: w.child.Err(), childCause: context.Cause(w.child), childDone: closed(w.child.Done()),
		afterFuncRan: closed(w.ran),
	}
}

// settleCtx must behave as the standard library's composition it replaces:
// the same Err, Cause, Deadline and Values, and the same end reaching a
// child and an AfterFunc, before and after its deadline and after stop,
// whether the caller's context is live or cancelled with a cause.
func TestSettleCtxMatchesStdlib(t *testing.T) {
	const timeout = time.Second
	for _, parentCancelled := range []bool{false, true} {
		for _, end := range []string{"deadline", "stop"} {
			t.Run(fmt.Sprintf("parentCancelled=%v/end=%s", parentCancelled, end), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, "v"))
					defer cancel(nil)
					if parentCancelled {
						cancel(errors.New("the client went away"))
					}
					mine := newSettleCtx(parent, time.Now().Add(timeout))
					std, stdCancel := context.WithTimeout(context.WithoutCancel(parent), timeout)
					ours, theirs := watch(t, mine), watch(t, std)
					compare := func(when string) {
						t.Helper()
						synctest.Wait()
						if got, want := ours.observe(), theirs.observe(); got != want {
							t.Errorf("%s:\nsettleCtx shows %v\nthe stdlib     %v", when, got, want)
						}
					}
					compare("before the deadline")
					if end == "stop" {
						time.Sleep(timeout / 2)
						mine.stop()
						stdCancel()
						compare("after stop")
					}
					time.Sleep(timeout)
					compare("after the deadline")
					mine.stop()
					stdCancel()
					compare("after the deadline and stop")
				})
			})
		}
	}
}

// Err must see the deadline pass even when nobody asked for Done, which
// is when no timer runs.
func TestSettleCtxErrWithoutDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newSettleCtx(context.Background(), time.Now().Add(time.Second))
		if c.Err() != nil {
			t.Fatalf("Err before the deadline = %v, want nil", c.Err())
		}
		time.Sleep(time.Second)
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err at the deadline = %v, want DeadlineExceeded", c.Err())
		}
		if !closed(c.Done()) {
			t.Fatal("Done past the deadline must be closed")
		}
	})
}

// A context derived from a settleCtx must not cost a goroutine: the
// context package starts one to watch a parent of a foreign type unless
// the parent has an AfterFunc method.
func TestSettleCtxChildrenStartNoGoroutine(t *testing.T) {
	c := newSettleCtx(context.Background(), time.Now().Add(time.Hour))
	before := runtime.NumGoroutine()
	var children []context.Context
	for range 100 {
		child, cancel := context.WithCancel(c)
		defer cancel()
		children = append(children, child)
	}
	if n := runtime.NumGoroutine() - before; n >= 50 {
		t.Fatalf("100 children of a settleCtx started %d goroutines, want none", n)
	}
	c.stop()
	for _, child := range children {
		<-child.Done()
		if !errors.Is(child.Err(), context.Canceled) {
			t.Fatalf("child after stop: Err = %v, want Canceled", child.Err())
		}
	}
}

// BenchmarkSettleCtx is why settleCtx exists: an in-process store only
// checks Err, and the standard library's composition costs a timer and two
// more allocations for it. A network client asks for Done, and then both
// start a timer.
func BenchmarkSettleCtx(b *testing.B) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	defer cancel()
	for _, done := range []bool{false, true} {
		use := func(ctx context.Context) {
			if done {
				_ = ctx.Done()
			}
			if ctx.Err() != nil {
				b.Fatal(ctx.Err())
			}
		}
		b.Run(fmt.Sprintf("Stdlib/Done=%v", done), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), time.Second)
				use(ctx)
				cancel()
			}
		})
		b.Run(fmt.Sprintf("SettleCtx/Done=%v", done), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx := newSettleCtx(parent, time.Now().Add(time.Second))
				use(ctx)
				ctx.stop()
			}
		})
	}
}

// context.AfterFunc on a settleCtx keeps the standard contract: a stop
// before the end reports true and the function never runs, while the
// other functions registered still run at the end.
func TestSettleCtxAfterFuncStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newSettleCtx(context.Background(), time.Now().Add(time.Hour))
		var ran [2]atomic.Bool
		stop0 := context.AfterFunc(c, func() { ran[0].Store(true) })
		context.AfterFunc(c, func() { ran[1].Store(true) })
		if !stop0() {
			t.Fatal("stop before the end = false, want true")
		}
		if stop0() {
			t.Error("a second stop = true, want false")
		}
		c.stop()
		synctest.Wait() // the functions run on goroutines of their own
		if ran[0].Load() || !ran[1].Load() {
			t.Errorf("after the end: stopped function ran %v, the other ran %v; want false, true", ran[0].Load(), ran[1].Load())
		}
	})
}
