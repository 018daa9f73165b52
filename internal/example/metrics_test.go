package example

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store/memstore"
)

func TestStartMetricsStdout(t *testing.T) {
	prev := otel.GetMeterProvider()
	defer otel.SetMeterProvider(prev)
	var out bytes.Buffer
	stop, err := StartMetrics("stdout", &out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	g.Lock(context.Background(), "k", func(context.Context) error { return nil })
	if err := stop(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}
	for _, want := range []string{"idemgate.outcomes", "idemgate.store.duration", `"won"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("metrics output lacks %s:\n%s", want, out.String())
		}
	}
}

func TestStartMetricsRejectsUnknownMode(t *testing.T) {
	if _, err := StartMetrics("prometheus", nil, time.Minute); err == nil {
		t.Fatal("an unknown IDEMGATE_METRICS must fail at start")
	}
}
