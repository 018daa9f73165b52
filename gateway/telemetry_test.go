package gateway_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store/memstore"
)

func TestTelemetry(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	st, _ := memstore.New(nil)
	g, err := gateway.New(st, &gateway.Options{
		NoRenew:        true,
		Logger:         (&logs{}).logger(),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	g.Lock(ctx, "a", counter(new(atomic.Int32)))                                // won
	g.Lock(ctx, "a", counter(new(atomic.Int32)))                                // duplicate
	g.Lock(ctx, "b", func(context.Context) error { return errors.New("boom") }) // failed
	g.Lock(ctx, "", counter(new(atomic.Int32)))                                 // no_key
	g.Mutex(ctx, "c", counter(new(atomic.Int32)))                               // won
	g.Mutex(ctx, "a", counter(new(atomic.Int32)))                               // in_progress (DONE key)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	ops := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					v, _ := p.Attributes.Value(attribute.Key("outcome"))
					got[v.AsString()] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					s, _ := p.Attributes.Value(attribute.Key("store"))
					op, _ := p.Attributes.Value(attribute.Key("operation"))
					ops[s.AsString()+"/"+op.AsString()] += p.Count
				}
			}
		}
	}
	want := map[string]int64{"won": 2, "duplicate": 1, "failed": 1, "no_key": 1, "in_progress": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("idemgate.outcomes{outcome=%s} = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	// Claims: a, a, b, c, a (the empty key never reaches the store).
	if ops["memstore/claim"] != 5 || ops["memstore/complete"] != 1 || ops["memstore/release"] != 2 {
		t.Errorf("idemgate.store.duration counts = %v, want claim 5, complete 1, release 2", ops)
	}

	ended := spans.Ended()
	if len(ended) != 6 {
		t.Fatalf("%d spans, want 6", len(ended))
	}
	first := ended[0]
	attrs := map[attribute.Key]attribute.Value{}
	for _, a := range first.Attributes() {
		attrs[a.Key] = a.Value
	}
	if first.Name() != "idemgate.Lock" || attrs["idemgate.key"].AsString() != "a" ||
		attrs["idemgate.outcome"].AsString() != "won" || attrs["idemgate.fence"].AsInt64() <= 0 {
		t.Errorf("first span = %s %v, want idemgate.Lock with key a, outcome won, a fence", first.Name(), attrs)
	}
	if ended[2].Status().Code.String() != "Error" {
		t.Errorf("a failed body's span status = %v, want Error", ended[2].Status())
	}
}

func TestHideKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := memstore.New(nil)
		fs := &faulty{Store: st}
		fs.failComplete.Store(true)
		l := &logs{}
		g, _ := gateway.New(fs, &gateway.Options{HideKeys: true, Logger: l.logger(), NoRenew: true})
		g.Lock(t.Context(), "alice@example.com", counter(new(atomic.Int32)))
		lines := l.lines(t, "ERROR")
		if len(lines) != 1 || lines[0]["key"] != nil || lines[0]["key_digest"] == nil {
			t.Fatalf("ERROR lines = %v, want a key_digest and no key", lines)
		}
	})
}
