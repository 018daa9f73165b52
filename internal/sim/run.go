package sim

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
)

// Run runs sc on b and checks it. Under fake time call it inside a
// testing/synctest bubble, with a store that reads time.Now.
func Run(sc *Scenario, b *Backend) *Result {
	w := &world{sc: sc, b: b, t: b.Timing, keys: map[string]*keyState{}, end: make(chan struct{}),
		won: map[string][]store.Claim{}, inflight: map[string]int{}, begun: map[string]int{}, inMutex: map[string]map[*delivery]bool{}}
	w.ext = b.Store.(store.Extender)
	w.insp = b.Store.(store.Inspector)
	w.fail, _ = b.Store.(store.Failer)
	w.logs = worldLog(w)
	w.start = time.Now()
	w.root, w.stop = context.WithCancel(context.Background())
	if sc.HideKeys {
		// The spans, like the log lines, must hold no key.
		w.spans = tracetest.NewSpanRecorder()
		w.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(w.spans))
	}
	for slot := range sc.Instances {
		w.procs = append(w.procs, w.newProcess(slot))
	}
	for _, m := range sc.Messages {
		ms := &msgState{m: m, settled: make(chan struct{})}
		ms.key = b.Prefix + m.ID
		if sc.BusinessKey {
			ms.key = "order_id:" + b.Prefix + m.Order
		}
		if sc.Fingerprint {
			ms.fp, _ = gateway.FingerprintPayload(&pushenvelope.Message{Data: []byte(m.Data), Attributes: w.attributes(m)})
		}
		w.msgs = append(w.msgs, ms)
		w.mu.Lock()
		w.key(ms.key)
		if m.Poison {
			fs := w.failures(ms.key)
			fs.poison, fs.final = true, fs.final || m.PoisonFinal
		}
		w.mu.Unlock()
	}
	if sc.Ordered {
		w.publishOrdered()
	} else {
		for _, ms := range w.msgs {
			w.all.Add(1)
			go w.publish(ms)
		}
	}
	if b.Purge != nil {
		w.all.Add(1)
		go w.purge()
	}
	if sc.Operator && w.fail != nil {
		w.all.Add(1)
		go w.operate()
	}

	// The horizon bounds the run: every message is settled long before
	// it unless something is stuck.
	horizon := make(chan struct{})
	ht := time.AfterFunc(400*w.t.Lease+w.t.TTL, func() { close(horizon) })
	defer ht.Stop()
	for _, ms := range w.msgs {
		select {
		case <-ms.settled:
		case <-horizon:
		}
	}
	// Let the deliveries still at work finish (stalled bodies resume and
	// answer late), then release the frozen ones.
	quiet := make(chan struct{})
	go func() { w.live.Wait(); close(quiet) }()
	select {
	case <-quiet:
	case <-horizon:
	}
	close(w.end)
	w.stop()
	w.all.Wait()
	<-quiet
	w.finalChecks()
	return &Result{Scenario: sc, Backend: b.Name, Violations: w.violations, Elapsed: w.now(), events: w.events, test: b.Test}
}

// lineLog keeps the lines a logger writes, rendered as "LEVEL msg k=v …"
// with groups dotted, and hands each to seen; warnOnly drops those below WARN.
type lineLog struct {
	seen     func(ctx context.Context, r slog.Record, text string)
	warnOnly bool
	mu       sync.Mutex
	lines    []logLine
}

type logLine struct {
	level slog.Level
	text  string
}

func (l *lineLog) logger() *slog.Logger { return slog.New(&lineHandler{l: l}) }

func (l *lineLog) all() []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]logLine(nil), l.lines...)
}

// worldLog keeps every line the gateways log, for the HideKeys rule, notes
// each delivery's outcome, and traces WARN and above.
func worldLog(w *world) *lineLog {
	return &lineLog{seen: func(ctx context.Context, r slog.Record, _ string) {
		gist := r.Level.String() + " " + r.Message
		d := deliveryFrom(ctx)
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "outcome" && d != nil {
				w.noteOutcome(d, a.Value.String()) // the guard's own line says what it made of d
			}
			if a.Key == "outcome" || a.Key == "error" {
				gist += " " + a.Key + "=" + a.Value.String()
			}
			return true
		})
		if r.Level >= slog.LevelWarn {
			w.tracef(d, "log: %s", gist)
		}
	}}
}

type lineHandler struct {
	l      *lineLog
	prefix string // rendered WithAttrs attributes
	group  string // WithGroup's, with a trailing dot
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool {
	return !h.l.warnOnly || l >= slog.LevelWarn
}

func (h *lineHandler) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message + h.prefix)
	r.Attrs(func(a slog.Attr) bool {
		render(&b, h.group, a)
		return true
	})
	h.l.mu.Lock()
	h.l.lines = append(h.l.lines, logLine{level: r.Level, text: b.String()})
	h.l.mu.Unlock()
	h.l.seen(ctx, r, b.String())
	return nil
}

func render(b *strings.Builder, group string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, m := range v.Group() {
			render(b, g, m)
		}
		return
	}
	if a.Key == "" {
		return
	}
	b.WriteString(" ")
	b.WriteString(group + a.Key)
	b.WriteString("=")
	b.WriteString(v.String())
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.prefix)
	for _, a := range as {
		render(&b, h.group, a)
	}
	return &lineHandler{l: h.l, prefix: b.String(), group: h.group}
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &lineHandler{l: h.l, prefix: h.prefix, group: h.group + name + "."}
}
