package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/store"
)

const instrumentation = "github.com/idemgate/idemgate/gateway"

// The store operations timed by the idemgate.store.duration histogram.
const (
	opClaim = iota
	opComplete
	opRelease
	opExtend
	opFail
	opCount
)

var opNames = [opCount]string{"claim", "complete", "release", "extend", "fail"}

var outcomeNames = []Outcome{
	OutcomeWon, OutcomeDuplicate, OutcomeInProgress, OutcomeFailed, OutcomeFencedOut,
	OutcomeCompleteError, OutcomeStoreError, OutcomeUnguarded, OutcomeNoKey, OutcomeRejected, OutcomeConflict,
	OutcomeCancelled, OutcomeAbandoned, OutcomeAlreadyFailed,
}

// telemetry holds the OpenTelemetry instruments. With the default global
// providers and no SDK installed they do nothing, at the cost of a few
// nanoseconds; the attribute sets are built once so recording allocates
// nothing.
type telemetry struct {
	tracer   trace.Tracer // nil: no spans
	outcomes metric.Int64Counter
	failures metric.Int64Counter // records gone FAILED, by reason and route
	storeDur metric.Float64Histogram
	byOut    map[Outcome][]metric.AddOption // passed as opts... to avoid a slice per call
	byOp     [opCount][]metric.RecordOption
}

func newTelemetry(o *Options, st store.Store) (*telemetry, error) {
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(instrumentation)
	t := &telemetry{byOut: make(map[Outcome][]metric.AddOption, len(outcomeNames))}
	if o.TracerProvider != nil {
		t.tracer = o.TracerProvider.Tracer(instrumentation)
	}
	var errs [3]error
	t.outcomes, errs[0] = meter.Int64Counter("idemgate.outcomes",
		metric.WithDescription("Guarded deliveries by outcome."), metric.WithUnit("{delivery}"))
	t.failures, errs[1] = meter.Int64Counter("idemgate.failures",
		metric.WithDescription("Keys whose work failed for good (FAILED), by reason (permanent, terminal, max_attempts) and route."), metric.WithUnit("{key}"))
	t.storeDur, errs[2] = meter.Float64Histogram("idemgate.store.duration",
		metric.WithDescription("Latency of store operations."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	for _, name := range outcomeNames {
		t.byOut[name] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", string(name))))}
	}
	name := o.StoreName
	if name == "" {
		name = storeName(st)
	}
	for op := range opCount {
		t.byOp[op] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("store", name), attribute.String("operation", opNames[op])))}
	}
	return t, nil
}

// storeName is the package of the store's type: "*redisstore.Store" → "redisstore".
func storeName(st store.Store) string {
	n := strings.TrimPrefix(fmt.Sprintf("%T", st), "*")
	if i := strings.IndexByte(n, '.'); i > 0 {
		n = n[:i]
	}
	return n
}

// outcome counts one outcome.
func (t *telemetry) outcome(ctx context.Context, name Outcome) {
	t.outcomes.Add(ctx, 1, t.byOut[name]...)
}

// timing reports whether store latencies are recorded. Without an SDK
// they are not, and the clock need not be read for them: a reading costs
// tens of nanoseconds, a good part of a fresh Lock on memstore.
func (t *telemetry) timing(ctx context.Context) bool { return t.storeDur.Enabled(ctx) }

// timed records the latency of a store operation that started at start
// (zero: not timed).
func (t *telemetry) timed(ctx context.Context, op int, start time.Time) {
	if start.IsZero() || !t.timing(ctx) {
		return
	}
	t.storeDur.Record(ctx, time.Since(start).Seconds(), t.byOp[op]...)
}

// startSpan opens the span of one guarded call, named e.g. "idemgate.Lock";
// without a TracerProvider it returns a nil span.
func (g *Gateway) startSpan(ctx context.Context, name, key string) (context.Context, trace.Span) {
	if g.tel.tracer == nil {
		return ctx, nil
	}
	ctx, span := g.tel.tracer.Start(ctx, name)
	if span.IsRecording() {
		if g.opts.HideKeys {
			span.SetAttributes(attribute.String("idemgate.key_digest", g.keyText(key)))
		} else {
			span.SetAttributes(attribute.String("idemgate.key", key))
		}
	}
	return ctx, span
}

// endSpan counts the outcome and closes the span with it.
func (g *Gateway) endSpan(ctx context.Context, span trace.Span, key string, outcome Outcome, fence int64, err error) {
	g.tel.outcome(ctx, outcome)
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("idemgate.outcome", string(outcome)))
		if fence > 0 {
			span.SetAttributes(attribute.Int64("idemgate.fence", fence))
		}
		if err != nil && (outcome == OutcomeFailed || outcome == OutcomeAbandoned || outcome == OutcomeStoreError || outcome == OutcomeNoKey) {
			span.RecordError(g.hideKey(key, err))
			span.SetStatus(codes.Error, string(outcome))
		}
	}
	span.End()
}
