package faultmatrix

import (
	"context"
	"log/slog"
	"strings"
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

// Log is a slog.Handler that keeps the level and outcome of every line. It
// is safe for concurrent use.
type Log struct {
	mu    sync.Mutex // guards lines
	lines []logLine
}

type logLine struct {
	level   slog.Level
	outcome string
	msg     string
}

// Logger returns a logger that writes into l.
func (l *Log) Logger() *slog.Logger { return slog.New(l) }

// Enabled implements slog.Handler: every level is kept.
func (l *Log) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (l *Log) Handle(_ context.Context, r slog.Record) error {
	line := logLine{level: r.Level, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "outcome" {
			line.outcome = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return nil
}

// WithAttrs implements slog.Handler; the attributes are dropped.
func (l *Log) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup implements slog.Handler; the group is dropped.
func (l *Log) WithGroup(string) slog.Handler { return l }

// HasMessage reports whether a line at level whose message contains part
// was logged.
func (l *Log) HasMessage(level slog.Level, part string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if line.level == level && strings.Contains(line.msg, part) {
			return true
		}
	}
	return false
}

// Has reports whether a line at level with the given outcome was logged.
func (l *Log) Has(level slog.Level, outcome string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if line.level == level && line.outcome == outcome {
			return true
		}
	}
	return false
}
