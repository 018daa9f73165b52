package relay_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
)

// A missing topic refuses every message published to it: the relay logs
// one line for a round's refusals, not one per message, and one for its
// deaths, each counting in "failures" the failures it stands for; the
// counters count them all. Once the topic exists, a publish to it logs
// that Pub/Sub accepts it again, with the failures since the first.
func TestMissingTopicLogsBounded(t *testing.T) {
	const n = 30
	_, c := fakePubSub(t)
	m := newModel()
	for i := range n {
		m.Add(t, fmt.Sprint("order-", i), 0, outbox.Message{Topic: "missing", Data: []byte("a")})
		m.Add(t, fmt.Sprint("late-", i), 9, outbox.Message{Topic: "missing", Data: []byte("b")}) // its last attempt
	}
	logs := &logtest.Sink{}
	reader := sdkmetric.NewManualReader()
	run := start(t, m, c, relay.Options{MinBackoff: time.Hour, MaxBackoff: time.Hour,
		Logger: logs.Logger(), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	m.Await(t, 30*time.Second, "the batch is settled", func() bool { return len(m.Calls()) > 0 })

	if got := counter(t, reader, "idemgate.relay.failures", "publish"); got != 2*n {
		t.Errorf("idemgate.relay.failures{operation=publish} = %d, want %d: every refusal counted", got, 2*n)
	}
	if got := counter(t, reader, "idemgate.relay.dead", ""); got != n {
		t.Errorf("idemgate.relay.dead = %d, want %d", got, n)
	}
	for _, tc := range []struct {
		level slog.Level
		msg   string
	}{
		{slog.LevelWarn, "relay: Pub/Sub refused a publish; the message will be published again after a backoff"},
		{slog.LevelError, "relay: a message is given up; it stays in the outbox, listed by idemgate relay -dead, until an operator revives it"},
	} {
		lines := logs.Records().Level(tc.level)
		if len(lines) != 1 || lines[0].Message != tc.msg || lines[0].Attrs["failures"] != fmt.Sprint(n) || lines[0].Attrs["topic"] != "missing" {
			t.Errorf("%s lines %v; want one %q for the %d failures of the round", tc.level, lines, tc.msg, n)
		}
	}

	// A duration names its unit, as every duration the library logs.
	if w := logs.Records().Level(slog.LevelWarn); len(w) != 1 || w[0].Attrs["retry_in_ms"] == "" || w[0].Attrs["retry_in"] != "" {
		t.Errorf("WARN lines %v; want the backoff as retry_in_ms", w)
	}

	// The topic is created: its next message is published, and the line
	// says the failures are over.
	if _, err := c.TopicAdminClient.CreateTopic(t.Context(), &pubsubpb.Topic{Name: "projects/p/topics/missing"}); err != nil {
		t.Fatal(err)
	}
	fresh := m.Add(t, "order-new", 0, outbox.Message{Topic: "missing", Data: []byte("c")})[0]
	m.Await(t, 30*time.Second, "the new message is sent", func() bool { return settledSent(m, fresh.ID) })
	run.stop(t)
	info := logs.Records().Level(slog.LevelInfo).Where(func(r logtest.Record) bool {
		return r.Message == "relay: Pub/Sub accepts the topic's publishes again"
	})
	if len(info) != 1 || info[0].Attrs["topic"] != "projects/p/topics/missing" || info[0].Attrs["failures"] != fmt.Sprint(2*n) {
		t.Errorf("INFO lines %v; want one saying the topic accepts publishes again after %d failures", info, 2*n)
	}
}
