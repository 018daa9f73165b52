// Package logtest captures what code logs through log/slog, for tests to
// assert on: a [Sink] is a slog.Handler that keeps every record, flattened
// to strings, and lets a test wait for a record instead of sleeping.
//
//	logs := &logtest.Sink{}
//	g, _ := gateway.New(st, &gateway.Options{Logger: logs.Logger()})
//	…
//	if errs := logs.Records().Level(slog.LevelError); len(errs) != 0 {
//		t.Errorf("ERROR lines:\n%s", errs)
//	}
package logtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Record is one logged record.
type Record struct {
	Level   slog.Level
	Message string
	// Attrs holds every attribute, the logger's own included, by name
	// (members of a group as "group.name"), valued as slog.Value.String
	// gives them.
	Attrs map[string]string

	rec   slog.Record
	chain []func(slog.Handler) slog.Handler // the WithAttrs and WithGroup calls, in order
}

// Outcome is the record's "outcome" attribute, or "" when it has none.
func (r Record) Outcome() string { return r.Attrs["outcome"] }

// JSON returns the record as slog.JSONHandler writes it, decoded: the
// keys "time", "level" and "msg", groups as nested objects, numbers as
// float64.
func (r Record) JSON() (map[string]any, error) {
	var buf bytes.Buffer
	var h slog.Handler = slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	for _, f := range r.chain {
		h = f(h)
	}
	if err := h.Handle(context.Background(), r.rec.Clone()); err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		return nil, fmt.Errorf("logtest: %q: %w", buf.Bytes(), err)
	}
	return m, nil
}

// String formats the record on one line: level, message, attributes.
func (r Record) String() string { return fmt.Sprintf("%s %s %v", r.Level, r.Message, r.Attrs) }

// Records are records in the order they were logged; each filter keeps
// that order.
type Records []Record

// Level returns the records at level.
func (rs Records) Level(level slog.Level) Records {
	return rs.Where(func(r Record) bool { return r.Level == level })
}

// Outcome returns the records whose "outcome" attribute is outcome.
func (rs Records) Outcome(outcome fmt.Stringer) Records { return rs.With("outcome", outcome.String()) }

// With returns the records whose attribute key (e.g. "delivery.message_id")
// is value.
func (rs Records) With(key, value string) Records {
	return rs.Where(func(r Record) bool {
		v, ok := r.Attrs[key]
		return ok && v == value
	})
}

// Containing returns the records whose message contains part.
func (rs Records) Containing(part string) Records {
	return rs.Where(func(r Record) bool { return strings.Contains(r.Message, part) })
}

// Where returns the records for which keep is true.
func (rs Records) Where(keep func(Record) bool) Records {
	var out Records
	for _, r := range rs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// String formats the records one a line, for a failure message.
func (rs Records) String() string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	return b.String()
}

// Sink keeps every record logged through its handlers, at every level.
// The zero value is ready to use; it is safe for concurrent use.
type Sink struct {
	mu      sync.Mutex // guards the fields below
	recs    Records
	taken   int           // records before this index were returned by Take
	changed chan struct{} // closed and replaced on each record; nil until a Wait
}

// Handler returns a slog.Handler that logs into s.
func (s *Sink) Handler() slog.Handler { return handler{s: s} }

// Logger returns a logger that logs into s.
func (s *Sink) Logger() *slog.Logger { return slog.New(s.Handler()) }

// Records returns the records so far.
func (s *Sink) Records() Records {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(Records(nil), s.recs...)
}

// Take returns the records logged since the last Take.
func (s *Sink) Take() Records {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append(Records(nil), s.recs[s.taken:]...)
	s.taken = len(s.recs)
	return out
}

// Wait waits up to timeout for cond to hold for the records so far, and
// fails t, saying that no what came and showing the records, if it does
// not.
func (s *Sink) Wait(t testing.TB, timeout time.Duration, what string, cond func(Records) bool) {
	t.Helper()
	expired := time.NewTimer(timeout)
	defer expired.Stop()
	for {
		s.mu.Lock()
		ok := cond(s.recs)
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-expired.C:
			t.Fatalf("no %s after %v; log:\n%s", what, timeout, s.Records())
		}
	}
}

func (s *Sink) add(r Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// handler is a Sink's slog.Handler, with what WithAttrs and WithGroup
// added.
type handler struct {
	s      *Sink
	prefix string      // the open groups, each followed by "."
	attrs  []slog.Attr // keys already prefixed
	chain  []func(slog.Handler) slog.Handler
}

func (h handler) Enabled(context.Context, slog.Level) bool { return true }

func (h handler) Handle(_ context.Context, r slog.Record) error {
	rec := Record{Level: r.Level, Message: r.Message, Attrs: map[string]string{}, rec: r.Clone(), chain: h.chain}
	for _, a := range h.attrs {
		flatten(rec.Attrs, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		flatten(rec.Attrs, h.prefix, a)
		return true
	})
	h.s.add(rec)
	return nil
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = h.attrs[:len(h.attrs):len(h.attrs)] // appends must not share
	for _, a := range as {
		h.attrs = append(h.attrs, slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	h.chain = append(h.chain[:len(h.chain):len(h.chain)], func(j slog.Handler) slog.Handler { return j.WithAttrs(as) })
	return h
}

func (h handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h.prefix += name + "."
	h.chain = append(h.chain[:len(h.chain):len(h.chain)], func(j slog.Handler) slog.Handler { return j.WithGroup(name) })
	return h
}

// flatten adds a to dst under prefix, each member of a group under the
// group's name; an empty attribute is dropped, as slog.Handler requires.
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
	if a.Key == "" && v.Any() == nil {
		return
	}
	dst[prefix+a.Key] = v.String()
}

// CheckGoRedisJSON fails t unless every line of out is JSON and at least
// one is go-redis's own line (component "go-redis", a WARNING about its
// connection pool), as a service's logger writes it after routing go-redis
// through slog (storeurl.RedisLogger).
func CheckGoRedisJSON(t testing.TB, out string) {
	t.Helper()
	var fromRedis int
	for line := range strings.Lines(out) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
		}
		if l["component"] == "go-redis" {
			fromRedis++
			if l["severity"] != "WARNING" || !strings.Contains(fmt.Sprint(l["message"]), "connection pool") {
				t.Errorf("go-redis line = %s, want a WARNING about its connection pool", line)
			}
		}
	}
	if fromRedis == 0 {
		t.Errorf("no go-redis line in the JSON log:\n%s", out)
	}
}
