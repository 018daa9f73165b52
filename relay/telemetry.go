package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentation = "github.com/idemgate/idemgate/relay"

// The operations counted by idemgate.relay.failures.
const (
	opTake = iota
	opPublish
	opSettle
	opListen
	opBacklog
	opUnknown
	opLease
	opCount
)

var opNames = [opCount]string{"take", "publish", "settle", "listen", "backlog", "publish_unknown", "lease"}

// backlogTimeout bounds the count behind each reading of the backlog gauge.
const backlogTimeout = 5 * time.Second

// telemetry holds the relay's instruments.
type telemetry struct {
	meter    metric.Meter
	lagHist  metric.Float64Histogram
	failures metric.Int64Counter
	dead     metric.Int64Counter
	backlog  metric.Int64ObservableGauge
	oldest   metric.Float64ObservableGauge
	deadNow  metric.Int64ObservableGauge
	sent     metric.Int64Counter
	byOp     [opCount][]metric.AddOption
	source   []attribute.KeyValue // "source", when the relay has a Name
	add      []metric.AddOption
	record   []metric.RecordOption
	obs      []metric.ObserveOption
}

func newTelemetry(mp metric.MeterProvider, name string) (*telemetry, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t := &telemetry{meter: mp.Meter(instrumentation)}
	var errs [7]error
	t.lagHist, errs[0] = t.meter.Float64Histogram("idemgate.relay.lag",
		metric.WithDescription("Time from an outbox message's enqueue to Pub/Sub's acknowledgement of its publish."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
	t.failures, errs[1] = t.meter.Int64Counter("idemgate.relay.failures",
		metric.WithDescription("Failed publishes, publishes of unknown outcome, publishing that outlived its lease, and failed outbox operations."), metric.WithUnit("{failure}"))
	t.dead, errs[2] = t.meter.Int64Counter("idemgate.relay.dead",
		metric.WithDescription("Outbox messages given up after their last allowed failed publish."), metric.WithUnit("{message}"))
	t.backlog, errs[3] = t.meter.Int64ObservableGauge("idemgate.relay.backlog",
		metric.WithDescription("Outbox messages committed and not yet sent."), metric.WithUnit("{message}"))
	t.oldest, errs[4] = t.meter.Float64ObservableGauge("idemgate.relay.oldest_age",
		metric.WithDescription("How long the oldest unsent outbox message has waited since its commit; 0 when none."), metric.WithUnit("s"))
	t.deadNow, errs[5] = t.meter.Int64ObservableGauge("idemgate.relay.dead_messages",
		metric.WithDescription("Outbox messages given up and kept for an operator."), metric.WithUnit("{message}"))
	t.sent, errs[6] = t.meter.Int64Counter("idemgate.relay.published",
		metric.WithDescription("Outbox messages Pub/Sub acknowledged."), metric.WithUnit("{message}"))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("relay: metrics: %w", err)
	}
	if name != "" {
		t.source = []attribute.KeyValue{attribute.String("source", name)}
	}
	set := attribute.NewSet(t.source...)
	t.add = []metric.AddOption{metric.WithAttributeSet(set)}
	t.record = []metric.RecordOption{metric.WithAttributeSet(set)}
	t.obs = []metric.ObserveOption{metric.WithAttributeSet(set)}
	for op := range opCount {
		attrs := append([]attribute.KeyValue{attribute.String("operation", opNames[op])}, t.source...)
		t.byOp[op] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	}
	return t, nil
}

// published counts one message Pub/Sub acknowledged, d after its commit.
func (t *telemetry) published(ctx context.Context, d time.Duration) {
	t.lagHist.Record(ctx, d.Seconds(), t.record...)
	t.sent.Add(ctx, 1, t.add...)
}

// failed counts one failure of op.
func (t *telemetry) failed(ctx context.Context, op int) {
	t.failures.Add(ctx, 1, t.byOp[op]...)
}

// died counts one message given up.
func (t *telemetry) died(ctx context.Context) {
	t.dead.Add(ctx, 1, t.add...)
}

// observe reports src's backlog, and a Stater's oldest age and dead
// messages, on each collection until unregister is called.
func (t *telemetry) observe(src Source) (unregister func(), err error) {
	stater, _ := src.(Stater)
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, backlogTimeout)
		defer cancel()
		if stater == nil {
			n, err := src.Backlog(ctx)
			if err != nil {
				t.failed(ctx, opBacklog)
				return nil // no reading this time
			}
			o.ObserveInt64(t.backlog, n, t.obs...)
			return nil
		}
		st, err := stater.Stats(ctx)
		if err != nil {
			t.failed(ctx, opBacklog)
			return nil
		}
		o.ObserveInt64(t.backlog, st.Unsent, t.obs...)
		o.ObserveFloat64(t.oldest, st.Oldest.Seconds(), t.obs...)
		o.ObserveInt64(t.deadNow, st.Dead, t.obs...)
		return nil
	}, t.backlog, t.oldest, t.deadNow)
	if err != nil {
		return nil, fmt.Errorf("relay: metrics: %w", err)
	}
	return func() { reg.Unregister() }, nil
}
