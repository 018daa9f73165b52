package faultmatrix

import (
	"context"
	"sync"
)

// Body is the work of one delivery's handler. The handler calls Enter when
// its work starts and the function Enter returns when the work ends (defer
// b.Enter(ctx)()). The bodies of one cell share a tally of how many run at
// once. A held body waits in Enter, ignoring its context, until Release.
type Body struct {
	tally   *tally
	gate    chan struct{} // closed by Release; nil for a body that is not held
	started chan struct{} // closed by Enter
	release sync.Once

	mu  sync.Mutex      // guards ctx
	ctx context.Context // the context the handler ran with; nil before Enter
}

// tally counts the bodies of one cell.
type tally struct {
	mu     sync.Mutex // guards the fields below
	runs   int        // bodies that started
	active int        // bodies running now
	most   int        // the largest active seen
}

func (t *tally) newBody(held bool) *Body {
	b := &Body{tally: t, started: make(chan struct{})}
	if held {
		b.gate = make(chan struct{})
	}
	return b
}

// Enter marks the start of the work and, for a held body, waits for
// Release. It returns the function that marks the end of the work.
func (b *Body) Enter(ctx context.Context) (leave func()) {
	b.mu.Lock()
	b.ctx = ctx
	b.mu.Unlock()
	t := b.tally
	t.mu.Lock()
	t.runs++
	t.active++
	t.most = max(t.most, t.active)
	t.mu.Unlock()
	close(b.started)
	if b.gate != nil {
		<-b.gate
	}
	return func() {
		t.mu.Lock()
		t.active--
		t.mu.Unlock()
	}
}

// Release lets a held body go on. It may be called more than once.
func (b *Body) Release() {
	if b.gate != nil {
		b.release.Do(func() { close(b.gate) })
	}
}

// Started reports whether the body has started.
func (b *Body) Started() bool {
	select {
	case <-b.started:
		return true
	default:
		return false
	}
}

// done returns the Done channel of the handler's context; nil before Enter.
func (b *Body) done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return nil
	}
	return b.ctx.Done()
}
