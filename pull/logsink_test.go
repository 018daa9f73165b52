package pull_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// logSink is a slog.Handler that keeps every record, flattened, and lets
// tests wait for records instead of sleeping.
type logSink struct {
	mu      sync.Mutex // guards the fields below
	recs    []logRecord
	changed chan struct{} // closed and replaced on each record
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string // group members as "group.name"
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{})} }

func (s *logSink) handler() slog.Handler { return sinkHandler{s: s} }

// wait waits until cond holds for the records so far.
func (s *logSink) wait(t testing.TB, what string, cond func([]logRecord) bool) {
	t.Helper()
	timeout := time.NewTimer(waitFor)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(s.recs), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("no %s after %v; log:\n%s", what, waitFor, s.dump())
		}
	}
}

// waitOutcome waits until n records have outcome (for message id, if
// not empty).
func (s *logSink) waitOutcome(t testing.TB, outcome, id string, n int) {
	t.Helper()
	s.wait(t, fmt.Sprintf("%d %q line(s) for message %q", n, outcome, id), func(recs []logRecord) bool {
		return len(matching(recs, outcome, id)) >= n
	})
}

func (s *logSink) records() []logRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logRecord(nil), s.recs...)
}

func (s *logSink) dump() string {
	var b strings.Builder
	for _, r := range s.records() {
		fmt.Fprintf(&b, "  %s %s %v\n", r.level, r.msg, r.attrs)
	}
	return b.String()
}

// matching returns the records with outcome (any, if empty) about message
// id (any, if empty).
func matching(recs []logRecord, outcome, id string) []logRecord {
	var out []logRecord
	for _, r := range recs {
		if (outcome == "" || r.attrs["outcome"] == outcome) && (id == "" || r.attrs["delivery.message_id"] == id) {
			out = append(out, r)
		}
	}
	return out
}

type sinkHandler struct {
	s      *logSink
	prefix string
	attrs  []slog.Attr
}

func (h sinkHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h sinkHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		flatten(rec.attrs, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		flatten(rec.attrs, h.prefix, a)
		return true
	})
	h.s.mu.Lock()
	h.s.recs = append(h.s.recs, rec)
	close(h.s.changed)
	h.s.changed = make(chan struct{})
	h.s.mu.Unlock()
	return nil
}

func (h sinkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		h.attrs = append(h.attrs[:len(h.attrs):len(h.attrs)], slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	return h
}

func (h sinkHandler) WithGroup(name string) slog.Handler {
	h.prefix += name + "."
	return h
}

func flatten(dst map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			flatten(dst, p, g)
		}
		return
	}
	dst[prefix+a.Key] = v.String()
}
