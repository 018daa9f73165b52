package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/benchratio"
	"github.com/idemgate/idemgate/store/memstore"
)

// countingWriter counts the bytes and lines written to it.
type countingWriter struct{ bytes, lines atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes.Add(int64(len(p)))
	w.lines.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}

// BenchmarkDuplicateLogLine prices the INFO line of a duplicate
// (Options.DuplicateLogLevel): duplicate deliveries through Idempotent on
// memstore, logged by slog's JSON handler at INFO (the subject) and at
// WARN, where the line is off (the baseline), side by side. It reports the
// ratio, what the line costs in ns, and its size: bytes per line and MB of
// log per million duplicates (docs/operations.md).
func BenchmarkDuplicateLogLine(b *testing.B) {
	st, _ := memstore.New(nil)
	var out countingWriter
	newGateway := func(level slog.Level) http.Handler {
		lg := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: level}))
		g, err := gateway.New(st, &gateway.Options{NoRenew: true, Logger: lg})
		if err != nil {
			b.Fatal(err)
		}
		return g.Route(&gateway.RouteOptions{}).Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	}
	on, off := newGateway(slog.LevelInfo), newGateway(slog.LevelWarn)
	// A Pub/Sub-like body: a 20-digit message id and a full subscription name.
	body := push("17371718293948271", map[string]string{"order_id": "o-1"}, `{"order_id":"o-1","amount":1250}`)
	body = strings.Replace(body, "projects/p/subscriptions/s", "projects/my-project/subscriptions/orders-push", 1)
	serve := func(h http.Handler) benchratio.Work {
		return func(context.Context, int64) error {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body)))
			if rec.Code != http.StatusOK && rec.Code != http.StatusNoContent {
				return fmt.Errorf("status %d", rec.Code)
			}
			return nil
		}
	}
	serve(off)(b.Context(), 0) // the one delivery that runs: every later one is a duplicate
	out.bytes.Store(0)
	out.lines.Store(0)
	benchratio.Compare(b, 1, 2048, serve(on), serve(off))
	if n := out.lines.Load(); n > 0 {
		perLine := float64(out.bytes.Load()) / float64(n)
		b.ReportMetric(perLine, "B/line")
		b.ReportMetric(perLine, "MB/1e6dup") // bytes per line × a million / 1e6
	}
}
