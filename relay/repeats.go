package relay

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/status"
)

// logDead is the failureKind.op of a message given up.
const logDead = -1

// A failureKind is what makes two failures the same for the log: the
// operation and, for a publish, its full topic name and gRPC code.
type failureKind struct {
	op    int
	topic string
	code  string
}

// repeats thins out the log lines of a failure that repeats: the first
// of a kind is logged, then one line per backoff step (min, doubled after
// each line, at most max) counting those left out; a kind not seen for
// twice max starts over. Safe for concurrent use.
type repeats struct {
	min, max time.Duration
	mu       sync.Mutex // guards kinds
	kinds    map[failureKind]*repeat
}

// repeat is one kind of failure that is going on.
type repeat struct {
	began, last time.Time     // its first and latest failure
	next        time.Time     // the earliest its next line may be written
	step        time.Duration // the wait after its latest line
	left        int           // failures left out of the log since its latest line
	total       int           // failures since it began
}

func newRepeats(minStep, maxStep time.Duration) *repeats {
	return &repeats{min: minStep, max: maxStep, kinds: make(map[failureKind]*repeat)}
}

// failed records n failures of kind k at now. It reports whether to log
// them, and how many failures the line stands for.
func (r *repeats) failed(k failureKind, n int, now time.Time) (count int, log bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.kinds[k]
	if s == nil || now.Sub(s.last) > 2*r.max {
		left := 0
		if s != nil {
			left = s.left
		}
		r.kinds[k] = &repeat{began: now, last: now, next: now.Add(r.min), step: r.min, total: n}
		return left + n, true
	}
	s.last = now
	s.total += n
	if now.Before(s.next) {
		s.left += n
		return 0, false
	}
	count, s.left = s.left+n, 0
	s.step = min(2*s.step, r.max)
	s.next = now.Add(s.step)
	return count, true
}

// ended forgets the kinds match selects, which are over, and returns how
// many failures they counted since the first began, and when; ok is false
// when none was going on.
func (r *repeats) ended(match func(failureKind) bool) (total int, began time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, s := range r.kinds {
		if !match(k) {
			continue
		}
		if !ok || s.began.Before(began) {
			began = s.began
		}
		total += s.total
		ok = true
		delete(r.kinds, k)
	}
	return total, began, ok
}

// errorCode names the kind of a publish error: its gRPC code, or its text.
func errorCode(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Code().String()
	}
	return err.Error()
}

// logFailure is logFailures for one failure.
func (r *Relay) logFailure(ctx context.Context, level slog.Level, k failureKind, msg string, args ...any) {
	r.logFailures(ctx, level, k, 1, msg, args...)
}

// logFailures logs msg at level for n failures of kind k, unless repeats
// thins it out; a line that stands for more than one says how many in
// "failures".
func (r *Relay) logFailures(ctx context.Context, level slog.Level, k failureKind, n int, msg string, args ...any) {
	count, ok := r.repeats.failed(k, n, time.Now())
	if !ok {
		return
	}
	if count > 1 {
		args = append(args, "failures", count)
	}
	r.opts.Logger.Log(ctx, level, msg, args...)
}

// roundLines gathers a round's failure lines, to log one per kind.
type roundLines struct {
	order  []failureKind
	byKind map[failureKind]*roundLine
}

// roundLine is the first failure's line of one kind, and how many there were.
type roundLine struct {
	level slog.Level
	msg   string
	args  []any
	n     int
}

// add adds a failure of kind k, whose line is msg at level with args.
func (l *roundLines) add(k failureKind, level slog.Level, msg string, args ...any) {
	if x, ok := l.byKind[k]; ok {
		x.n++
		return
	}
	if l.byKind == nil {
		l.byKind = make(map[failureKind]*roundLine)
	}
	l.order = append(l.order, k)
	l.byKind[k] = &roundLine{level: level, msg: msg, args: args, n: 1}
}

// logRound logs l's lines, in the order of their kinds' first failures.
func (r *Relay) logRound(ctx context.Context, l *roundLines) {
	for _, k := range l.order {
		x := l.byKind[k]
		r.logFailures(ctx, x.level, k, x.n, x.msg, x.args...)
	}
}

// recovered ends the failures of op, or of topic when not empty, and
// logs that the topic's publishes succeed again.
func (r *Relay) recovered(ctx context.Context, op int, topic string) {
	total, began, ok := r.repeats.ended(func(k failureKind) bool {
		if topic != "" {
			return k.topic == topic
		}
		return k.op == op
	})
	if ok && topic != "" {
		r.opts.Logger.InfoContext(ctx, "relay: Pub/Sub accepts the topic's publishes again",
			"topic", topic, "failures", total, "since", began.UTC().Format(time.RFC3339))
	}
}
