package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/fakeclock"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// TestGuardOutcomes drives the guard every surface shares through its one
// entry point, Deliver, once per outcome: the Result each adapter's table
// reads, the one log line, and the metric.
func TestGuardOutcomes(t *testing.T) {
	errWork := errors.New("supplier down")
	errNoAttr := errors.New(`the message has no "order_id" attribute`)
	type world struct {
		clk *fakeclock.Clock
		st  *faulty
		mem *memstore.Store
		ctx context.Context // the work's
	}
	tests := []struct {
		name     string
		opts     gateway.Options
		prepare  func(w *world)       // before the delivery
		route    gateway.RouteOptions // Key default: "k"
		delivery gateway.Delivery
		work     func(w *world) error
		want     gateway.Result // Outcome, Ran, Panic; Err is checked with wantErr
		wantErr  error          // errors.Is target; nil: Err must be nil
		wantLog  string         // "LEVEL message" of the one line carrying the outcome; "" for none
		logCause string         // what that line's error attribute says, in part; "" unchecked
		alsoLog  string         // "LEVEL outcome message" of the one line with another outcome; "" for none
		wantRuns int
	}{
		{name: "won",
			want: gateway.Result{Outcome: "won", Ran: true}, wantLog: "DEBUG idemgate: delivery processed", wantRuns: 1},
		{name: "duplicate",
			prepare: func(w *world) { done(t, w.mem, "k") },
			want:    gateway.Result{Outcome: "duplicate"}, wantErr: gateway.ErrDuplicate, wantLog: "INFO idemgate: duplicate delivery acknowledged"},
		{name: "in progress",
			prepare: func(w *world) { w.mem.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}) },
			want:    gateway.Result{Outcome: "in_progress"}, wantErr: gateway.ErrInProgress, wantLog: "WARN idemgate: key held by another delivery; asking for a retry"},
		{name: "failed",
			work: func(*world) error { return errWork },
			want: gateway.Result{Outcome: "failed", Ran: true}, wantErr: errWork, wantLog: "ERROR idemgate: handler failed; the claim was released for a retry", wantRuns: 1},
		{name: "panicked",
			work: func(*world) error { panic("boom") },
			want: gateway.Result{Outcome: "failed", Ran: true, Panic: "boom"}, wantLog: "ERROR idemgate: handler panicked; the claim was released for a retry", wantRuns: 1},
		{name: "fenced out in the work's transaction",
			work: func(w *world) error {
				w.clk.Advance(gateway.DefaultLease + time.Second)
				if _, err := w.mem.Claim(context.Background(), "k", time.Minute, store.ClaimOptions{}); err != nil {
					return err
				}
				return fmt.Errorf("ledger: %w", store.ErrFenced)
			},
			want: gateway.Result{Outcome: "in_progress", Ran: true}, wantErr: gateway.ErrInProgress, wantLog: "WARN idemgate: claim taken over before the work committed; nothing written, the new holder is at work; asking for a retry", wantRuns: 1},
		{name: "fenced out on a record done already",
			work: func(w *world) error {
				c, _ := gateway.ClaimFromContext(w.ctx)
				if _, err := w.mem.Complete(context.Background(), c); err != nil {
					return err
				}
				return fmt.Errorf("ledger: %w", store.ErrFenced)
			},
			want: gateway.Result{Outcome: "fenced_out", Ran: true}, wantLog: "WARN idemgate: claim taken over before the work committed; nothing written, the work is done", wantRuns: 1},
		{name: "fenced out with nobody else holding the key",
			work: func(w *world) error { return fmt.Errorf("ledger: %w", store.ErrFenced) },
			want: gateway.Result{Outcome: "failed", Ran: true}, wantErr: store.ErrFenced, wantLog: "ERROR idemgate: handler failed; the claim was released for a retry", wantRuns: 1},
		{name: "fenced out after the lease",
			work: func(w *world) error {
				w.clk.Advance(gateway.DefaultLease + time.Second)
				_, err := w.mem.Claim(context.Background(), "k", time.Minute, store.ClaimOptions{})
				return err
			},
			want: gateway.Result{Outcome: "fenced_out", Ran: true}, wantLog: "ERROR idemgate: work done after the claim was taken over (lease too short?); the new holder may repeat it", wantRuns: 1},
		{name: "complete error",
			prepare: func(w *world) { w.st.failComplete.Store(true) },
			want:    gateway.Result{Outcome: "complete_error", Ran: true}, wantLog: "ERROR idemgate: work done but not recorded as done; a redelivery may repeat it", wantRuns: 1},
		{name: "store error",
			prepare: func(w *world) { w.st.failClaim.Store(true) },
			want:    gateway.Result{Outcome: "store_error"}, wantErr: gateway.ErrStore, wantLog: "ERROR idemgate: store failed; asking for a retry"},
		{name: "no key", route: gateway.RouteOptions{Key: keyErr(errNoAttr)},
			want: gateway.Result{Outcome: "no_key"}, wantErr: gateway.ErrNoKey, wantLog: "ERROR idemgate: no idempotency key; refusing to run unguarded",
			logCause: errNoAttr.Error()},
		{name: "empty key", route: gateway.RouteOptions{Key: keyOf("")},
			want: gateway.Result{Outcome: "no_key"}, wantErr: gateway.ErrNoKey, wantLog: "ERROR idemgate: no idempotency key; refusing to run unguarded",
			logCause: "empty key"},
		{name: "key the store refuses", route: gateway.RouteOptions{Key: keyOf("k\x00")},
			want: gateway.Result{Outcome: "no_key"}, wantErr: gateway.ErrNoKey, wantLog: "ERROR idemgate: no idempotency key; refusing to run unguarded",
			logCause: "NUL byte"},
		{name: "empty key, AllowUnguarded", route: gateway.RouteOptions{Key: keyOf(""), AllowUnguarded: new(true)},
			want: gateway.Result{Outcome: "unguarded", Ran: true}, wantLog: "WARN idemgate: no key; running unguarded (AllowUnguarded)", wantRuns: 1,
			logCause: "empty key"},
		{name: "no key, AllowUnguarded", route: gateway.RouteOptions{Key: keyErr(errNoAttr), AllowUnguarded: new(true)},
			want: gateway.Result{Outcome: "unguarded", Ran: true}, wantLog: "WARN idemgate: no key; running unguarded (AllowUnguarded)", wantRuns: 1,
			logCause: errNoAttr.Error()},
		{name: "no key, AllowUnguarded, work fails", route: gateway.RouteOptions{Key: keyErr(errNoAttr), AllowUnguarded: new(true)},
			work: func(*world) error { return errWork },
			want: gateway.Result{Outcome: "unguarded", Ran: true}, wantErr: errWork, wantLog: "WARN idemgate: no key; running unguarded (AllowUnguarded)", wantRuns: 1,
			alsoLog: "ERROR failed idemgate: handler failed; the claim was released for a retry"},
		{name: "disabled", opts: gateway.Options{Disabled: true},
			prepare: func(w *world) { done(t, w.mem, "k") },
			want:    gateway.Result{Outcome: "unguarded", Ran: true}, wantLog: "WARN idemgate: guard disabled; running unguarded", wantRuns: 1},
		{name: "conflict with a done record", route: gateway.RouteOptions{Fingerprint: fingerprintOf("order B")},
			prepare: func(w *world) { doneWith(t, w.mem, "k", "order A") },
			want:    gateway.Result{Outcome: "conflict"}, wantErr: gateway.ErrConflict, wantLog: "ERROR idemgate: key reused for a different payload; refusing it"},
		{name: "conflict with a holder", route: gateway.RouteOptions{Fingerprint: fingerprintOf("order B")},
			prepare: func(w *world) {
				w.mem.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{Fingerprint: []byte("order A")})
			},
			want: gateway.Result{Outcome: "conflict"}, wantErr: gateway.ErrConflict, wantLog: "ERROR idemgate: key reused for a different payload; refusing it"},
		{name: "conflict with a holder, AcceptConflicts", route: gateway.RouteOptions{Fingerprint: fingerprintOf("order B"), AcceptConflicts: new(true)},
			prepare: func(w *world) {
				w.mem.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{Fingerprint: []byte("order A")})
			},
			want: gateway.Result{Outcome: "in_progress"}, wantErr: gateway.ErrConflict, wantLog: "WARN idemgate: key reused for a different payload while the first is in progress; asking for a retry"},
		{name: "conflict accepted", route: gateway.RouteOptions{Fingerprint: fingerprintOf("order B"), AcceptConflicts: new(true)},
			prepare: func(w *world) { doneWith(t, w.mem, "k", "order A") },
			want:    gateway.Result{Outcome: "conflict"}, wantErr: gateway.ErrConflict, wantLog: "ERROR idemgate: key reused for a different payload; acknowledged as a duplicate (AcceptConflicts)"},
		{name: "same payload is a duplicate", route: gateway.RouteOptions{Fingerprint: fingerprintOf("order A")},
			prepare: func(w *world) { doneWith(t, w.mem, "k", "order A") },
			want:    gateway.Result{Outcome: "duplicate"}, wantErr: gateway.ErrDuplicate, wantLog: "INFO idemgate: duplicate delivery acknowledged"},
		{name: "a record without a fingerprint is a duplicate", route: gateway.RouteOptions{Fingerprint: fingerprintOf("order B")},
			prepare: func(w *world) { done(t, w.mem, "k") },
			want:    gateway.Result{Outcome: "duplicate"}, wantErr: gateway.ErrDuplicate, wantLog: "INFO idemgate: duplicate delivery acknowledged"},
		{name: "fingerprint fails", route: gateway.RouteOptions{Fingerprint: func(*pushenvelope.Message) ([]byte, error) { return nil, errWork }},
			want: gateway.Result{Outcome: "rejected"}, wantErr: errWork, wantLog: "WARN idemgate: rejected a request that is not a usable delivery"},
		{name: "fingerprint too long", route: gateway.RouteOptions{Fingerprint: fingerprintOf(strings.Repeat("x", 33))},
			want: gateway.Result{Outcome: "rejected"}, wantErr: store.ErrInvalidFingerprint, wantLog: "WARN idemgate: rejected a request that is not a usable delivery"},
		{name: "rejected", delivery: gateway.Delivery{Invalid: pushenvelope.ErrNotPush},
			want: gateway.Result{Outcome: "rejected"}, wantErr: pushenvelope.ErrNotPush, wantLog: "WARN idemgate: rejected a request that is not a usable delivery"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New()
			mem, err := memstore.New(&memstore.Options{Now: clk.Now, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			w := &world{clk: clk, st: &faulty{Store: mem}, mem: mem}
			if tt.prepare != nil {
				tt.prepare(w)
			}
			reader := sdkmetric.NewManualReader()
			logs := &logs{}
			opts := tt.opts
			opts.Logger, opts.NoRenew, opts.SettleTimeout = logs.logger(), true, 100*time.Millisecond
			opts.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			g, err := gateway.New(w.st, &opts)
			if err != nil {
				t.Fatal(err)
			}
			route := tt.route
			if route.Key == nil {
				route.Key = keyOf("k")
			}
			d := tt.delivery
			d.Message, d.Form = &pushenvelope.Message{ID: "m-1"}, "push-wrapped"
			runs := 0
			res := g.Route(&route).Deliver(t.Context(), &d, func(ctx context.Context) error {
				runs++
				if tt.work == nil {
					return nil
				}
				w.ctx = ctx
				return tt.work(w)
			})

			if res.Outcome != tt.want.Outcome || res.Ran != tt.want.Ran || res.Panic != tt.want.Panic {
				t.Errorf("Result = {Outcome %q, Ran %v, Panic %v}, want {%q, %v, %v}", res.Outcome, res.Ran, res.Panic, tt.want.Outcome, tt.want.Ran, tt.want.Panic)
			}
			if tt.wantErr == nil && res.Err != nil || tt.wantErr != nil && !errors.Is(res.Err, tt.wantErr) {
				t.Errorf("Result.Err = %v, want %v", res.Err, tt.wantErr)
			}
			if tt.want.Outcome == "in_progress" && res.LeaseUntil.IsZero() {
				t.Error("in progress: Result.LeaseUntil is zero, want the holder's lease end")
			}
			if runs != tt.wantRuns {
				t.Errorf("the work ran %d times, want %d", runs, tt.wantRuns)
			}
			lines := logs.Records().With("outcome", string(tt.want.Outcome))
			if len(lines) != 1 || lines[0].Level.String()+" "+lines[0].Message != tt.wantLog {
				t.Errorf("log lines with outcome %s:\n%s\nwant one: %s", tt.want.Outcome, lines, tt.wantLog)
			} else if lines[0].Attrs["delivery.message_id"] != "m-1" || lines[0].Attrs["delivery.form"] != "push-wrapped" {
				t.Errorf("the line does not identify the delivery: %v", lines[0])
			} else if cause := lines[0].Attrs["error"]; !strings.Contains(cause, tt.logCause) {
				t.Errorf("the line's error is %q, want it to tell why: %q", cause, tt.logCause)
			}
			others := logs.Records().Where(func(r logtest.Record) bool { return r.Outcome() != "" && r.Outcome() != string(tt.want.Outcome) })
			if tt.alsoLog == "" && len(others) != 0 || tt.alsoLog != "" && (len(others) != 1 || others[0].Level.String()+" "+others[0].Outcome()+" "+others[0].Message != tt.alsoLog) {
				t.Errorf("log lines with another outcome:\n%s\nwant: %q", others, tt.alsoLog)
			}
			if got := outcomeCounts(t, reader); len(got) != 1 || got[string(tt.want.Outcome)] != 1 {
				t.Errorf("idemgate.outcomes = %v, want {%s: 1}", got, tt.want.Outcome)
			}
		})
	}
}

// keyOf is a key function that answers key.
func keyOf(key string) gateway.KeyFunc {
	return func(*pushenvelope.Message) (string, error) { return key, nil }
}

// keyErr is a key function that fails with err.
func keyErr(err error) gateway.KeyFunc {
	return func(*pushenvelope.Message) (string, error) { return "", err }
}

// fingerprintOf is a fingerprint function that answers fp.
func fingerprintOf(fp string) func(*pushenvelope.Message) ([]byte, error) {
	return func(*pushenvelope.Message) ([]byte, error) { return []byte(fp), nil }
}

// done records key as done in st.
func done(t *testing.T, st store.Store, key string) { doneWith(t, st, key, "") }

// doneWith records key as done in st, keeping the fingerprint fp.
func doneWith(t *testing.T, st store.Store, key, fp string) {
	t.Helper()
	c, err := st.Claim(t.Context(), key, time.Minute, store.ClaimOptions{Fingerprint: []byte(fp)})
	if err == nil {
		_, err = st.Complete(t.Context(), c)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// outcomeCounts reads the idemgate.outcomes counter by outcome.
func outcomeCounts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "idemgate.outcomes" {
				for _, p := range sum.DataPoints {
					v, _ := p.Attributes.Value("outcome")
					got[v.AsString()] += p.Value
				}
			}
		}
	}
	return got
}
