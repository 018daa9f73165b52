package relay_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	_ "modernc.org/sqlite"

	"github.com/idemgate/idemgate/internal/outboxmodel"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// model is the in-memory outbox the relay's tests run on.
type model = outboxmodel.Outbox

func newModel() *model { return outboxmodel.New(time.Hour) }

func TestNewRejects(t *testing.T) {
	st := sqliteStore(t)
	c := &pubsub.Client{}
	for name, tc := range map[string]struct {
		src  relay.Source
		pub  *pubsub.Client
		opts relay.Options
	}{
		"nil source":            {nil, c, relay.Options{}},
		"nil client":            {st.Outbox(), nil, relay.Options{}},
		"negative batch":        {st.Outbox(), c, relay.Options{BatchSize: -1}},
		"negative lease":        {st.Outbox(), c, relay.Options{Lease: -time.Second}},
		"tiny lease":            {st.Outbox(), c, relay.Options{Lease: time.Millisecond}},
		"negative poll":         {st.Outbox(), c, relay.Options{PollInterval: -time.Second}},
		"negative min backoff":  {st.Outbox(), c, relay.Options{MinBackoff: -time.Second}},
		"negative max backoff":  {st.Outbox(), c, relay.Options{MaxBackoff: -time.Second}},
		"max under min backoff": {st.Outbox(), c, relay.Options{MinBackoff: time.Minute, MaxBackoff: time.Second}},
		"negative stop timeout": {st.Outbox(), c, relay.Options{StopTimeout: -time.Second}},
	} {
		if _, err := relay.New(tc.src, tc.pub, &tc.opts); err == nil || !strings.HasPrefix(err.Error(), "relay: ") {
			t.Errorf("%s: New = %v, want a \"relay: …\" error", name, err)
		}
	}
	if _, err := relay.New(st.Outbox(), c, nil); err != nil {
		t.Errorf("New with nil options: %v", err)
	}
	if _, err := relay.New(st.Outbox(), c, &relay.Options{Lease: 10 * time.Millisecond}); err != nil {
		t.Errorf("New with the shortest Lease allowed, 10ms: %v", err)
	}
}

// sqliteStore returns a SQLite store with an outbox in a file of t's own.
func sqliteStore(t testing.TB) *sqlstore.Store {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "relay.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	st, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{Outbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// enqueue commits msgs under a fresh claim of key.
func enqueue(t testing.TB, st *sqlstore.Store, key string, msgs ...outbox.Message) {
	t.Helper()
	ctx := t.Context()
	c, err := st.Claim(ctx, key, time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CompleteTx(ctx, tx, c, msgs...); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// gate is a Source whose Settle of a batch with unsent messages waits
// until open is closed: the test acts while the relay holds still.
type gate struct {
	relay.Source
	failed chan struct{} // closed at the first Settle with unsent messages
	open   chan struct{}
	once   sync.Once
}

func (g *gate) Settle(ctx context.Context, sent []outbox.Pending, unsent []outbox.Failure) error {
	if len(unsent) > 0 {
		g.once.Do(func() {
			close(g.failed)
			<-g.open
		})
	}
	return g.Source.Settle(ctx, sent, unsent)
}

// metrics are the relay's readings.
type metrics struct {
	lags     uint64 // publishes timed by idemgate.relay.lag
	failures int64  // idemgate.relay.failures{operation=publish}
	backlog  int64  // idemgate.relay.backlog, -1 if unread
}

func collect(t testing.TB, reader *sdkmetric.ManualReader) metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	m := metrics{backlog: -1}
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			switch d := x.Data.(type) {
			case metricdata.Histogram[float64]:
				if x.Name == "idemgate.relay.lag" {
					for _, p := range d.DataPoints {
						m.lags += p.Count
					}
				}
			case metricdata.Sum[int64]:
				if x.Name == "idemgate.relay.failures" {
					for _, p := range d.DataPoints {
						if v, _ := p.Attributes.Value("operation"); v.AsString() == "publish" {
							m.failures += p.Value
						}
					}
				}
			case metricdata.Gauge[int64]:
				if x.Name == "idemgate.relay.backlog" {
					for _, p := range d.DataPoints {
						m.backlog = p.Value
					}
				}
			}
		}
	}
	return m
}

// waitUntil polls cond until it holds, failing t after d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond) // polling a real condition, with a deadline
	}
}

// A publish that fails pauses its ordering key in the client; the relay
// gives the key's messages back, resumes the key, and publishes them, in
// order, once publishing works. The metrics count the failures and the
// lag of each message, and the backlog ends at zero.
func TestFailedPublishResumesOrderingKey(t *testing.T) {
	t.Parallel() // it waits out real time: a lease, or the client's publish timeout
	ctx := t.Context()
	host := testenv.PubSubEmulatorHost(t)
	project := testenv.PubSubProject(t)
	client, err := pubsub.NewClient(ctx, project, testenv.PubSubClientOptions(host)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	st := sqliteStore(t)
	topic := "projects/" + project + "/topics/later"
	const n = 6
	var msgs []outbox.Message
	for i := range n {
		msgs = append(msgs, outbox.Message{Topic: topic, OrderingKey: "k", Data: []byte(fmt.Sprint(i))})
	}
	enqueue(t, st, "order-1", msgs...)

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	g := &gate{Source: st.Outbox(), failed: make(chan struct{}), open: make(chan struct{})}
	r, err := relay.New(g, client, &relay.Options{PollInterval: 20 * time.Millisecond, Lease: 10 * time.Second,
		MeterProvider: mp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	}()

	// The topic does not exist yet: the publishes fail.
	select {
	case <-g.failed:
	case <-time.After(30 * time.Second):
		t.Fatal("no publish failed on a missing topic")
	}
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	sub, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/later", Topic: topic, EnableMessageOrdering: true, AckDeadlineSeconds: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	close(g.open)

	var (
		mu  sync.Mutex // guards got
		got []string
	)
	recvCtx, stopRecv := context.WithCancel(ctx)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		seen := map[string]bool{}
		client.Subscriber(sub.Name).Receive(recvCtx, func(_ context.Context, m *pubsub.Message) {
			mu.Lock()
			if ck := m.Attributes[outbox.ChildKeyAttribute]; !seen[ck] {
				seen[ck] = true
				got = append(got, string(m.Data))
			}
			mu.Unlock()
			m.Ack()
		})
	}()
	defer func() { stopRecv(); <-recvDone }()
	arrived := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	waitUntil(t, 60*time.Second, "every message arrives once the topic exists (a paused ordering key must be resumed)", func() bool {
		return len(arrived()) == n
	})
	if got, want := strings.Join(arrived(), " "), "0 1 2 3 4 5"; got != want {
		t.Errorf("arrived %q, want %q: the messages of a key in order, across a failure", got, want)
	}
	waitUntil(t, 30*time.Second, "the outbox is drained", func() bool {
		b, err := st.Outbox().Backlog(ctx)
		return err == nil && b == 0
	})
	m := collect(t, reader)
	if m.lags != n {
		t.Errorf("idemgate.relay.lag counted %d publishes, want %d (one per acknowledged publish)", m.lags, n)
	}
	if m.failures < 1 {
		t.Errorf("idemgate.relay.failures{operation=publish} = %d, want the failed publishes counted", m.failures)
	}
	if m.backlog != 0 {
		t.Errorf("idemgate.relay.backlog = %d, want 0 once drained", m.backlog)
	}
}

// flakyStore is a Source whose first Take and first Listen fail; Listen
// then listens (and wakes no one) until its ctx ends.
type flakyStore struct {
	*model
	mu             sync.Mutex // guards takes and listens
	takes, listens int
}

// first counts a call in n and reports whether it is the first.
func (f *flakyStore) first(n *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	*n++
	return *n == 1
}

func (f *flakyStore) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	if f.first(&f.takes) {
		return nil, errors.New("the store is down")
	}
	return f.model.Take(ctx, n, lease)
}

func (f *flakyStore) Listen(ctx context.Context, wake func()) error {
	if f.first(&f.listens) {
		return errors.New("the store's notifications are down")
	}
	<-ctx.Done()
	return ctx.Err()
}

// A failed Take, or a failed Listen, is counted and tried again; neither
// ends Run.
func TestStoreFailuresAreCountedAndRetried(t *testing.T) {
	_, c := fakePubSub(t)
	m := newModel()
	p := m.Add(t, "order-1", 0, outbox.Message{Topic: outTopic, Data: []byte("ship")})[0]
	reader := sdkmetric.NewManualReader()
	src := &flakyStore{model: m}
	run := start(t, src, c, relay.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	m.Await(t, 30*time.Second, "the message is published after the failed Take", func() bool { return !m.Present(p.ID) })
	waitUntil(t, 30*time.Second, "Listen is called again after its failure", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.listens >= 2
	})
	run.stop(t)
	for _, op := range []string{"take", "listen"} {
		if got := counter(t, reader, "idemgate.relay.failures", op); got != 1 {
			t.Errorf("idemgate.relay.failures{operation=%s} = %d, want 1", op, got)
		}
	}
}
