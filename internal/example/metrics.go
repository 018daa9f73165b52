package example

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// StartMetrics installs an OpenTelemetry meter provider as the global one
// when mode is "stdout": every interval, the metrics (idemgate.outcomes,
// idemgate.store.duration, …) are written to w as JSON. An empty mode
// installs nothing. The returned function flushes and stops the provider.
func StartMetrics(mode string, w io.Writer, interval time.Duration) (func(context.Context) error, error) {
	switch mode {
	case "", "none":
		return func(context.Context) error { return nil }, nil
	case "stdout":
	default:
		return nil, fmt.Errorf("IDEMGATE_METRICS=%q: want stdout or none", mode)
	}
	exp, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval))))
	otel.SetMeterProvider(mp)
	return mp.Shutdown, nil
}
