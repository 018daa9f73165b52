package relay

import (
	"context"
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
	byOp     [opCount][]metric.AddOption
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t := &telemetry{meter: mp.Meter(instrumentation)}
	var err error
	if t.lagHist, err = t.meter.Float64Histogram("idemgate.relay.lag",
		metric.WithDescription("Time from an outbox message's enqueue to Pub/Sub's acknowledgement of its publish."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)); err != nil {
		return nil, fmt.Errorf("relay: metrics: %w", err)
	}
	if t.failures, err = t.meter.Int64Counter("idemgate.relay.failures",
		metric.WithDescription("Failed publishes, publishes of unknown outcome, publishing that outlived its lease, and failed outbox operations."), metric.WithUnit("{failure}")); err != nil {
		return nil, fmt.Errorf("relay: metrics: %w", err)
	}
	if t.dead, err = t.meter.Int64Counter("idemgate.relay.dead",
		metric.WithDescription("Outbox messages given up after their last allowed failed publish."), metric.WithUnit("{message}")); err != nil {
		return nil, fmt.Errorf("relay: metrics: %w", err)
	}
	if t.backlog, err = t.meter.Int64ObservableGauge("idemgate.relay.backlog",
		metric.WithDescription("Outbox messages committed and not yet sent."), metric.WithUnit("{message}")); err != nil {
		return nil, fmt.Errorf("relay: metrics: %w", err)
	}
	for op := range opCount {
		t.byOp[op] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", opNames[op])))}
	}
	return t, nil
}

// lag records one message's publish lag.
func (t *telemetry) lag(ctx context.Context, d time.Duration) {
	t.lagHist.Record(ctx, d.Seconds())
}

// failed counts one failure of op.
func (t *telemetry) failed(ctx context.Context, op int) {
	t.failures.Add(ctx, 1, t.byOp[op]...)
}

// died counts one message given up.
func (t *telemetry) died(ctx context.Context) {
	t.dead.Add(ctx, 1)
}

// observeBacklog reports src's backlog on each collection until
// unregister is called.
func (t *telemetry) observeBacklog(src Source) (unregister func(), err error) {
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, backlogTimeout)
		defer cancel()
		n, err := src.Backlog(ctx)
		if err != nil {
			t.failed(ctx, opBacklog)
			return nil // no reading this time
		}
		o.ObserveInt64(t.backlog, n)
		return nil
	}, t.backlog)
	if err != nil {
		return nil, fmt.Errorf("relay: metrics: %w", err)
	}
	return func() { reg.Unregister() }, nil
}
