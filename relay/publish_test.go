package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/internal/outboxmodel"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
)

// reactor is a pstest reactor made of a function.
type reactor func(req any) (handled bool, ret any, err error)

func (f reactor) React(req any) (bool, any, error) { return f(req) }

// onPublish reacts to the Publish requests of a pstest server.
func onPublish(f reactor) pstest.ServerReactorOption {
	return pstest.ServerReactorOption{FuncName: "Publish", Reactor: f}
}

// outTopic is the topic fakePubSub creates.
const outTopic = fakepubsub.Topic

// fakePubSub returns a client of a pstest server, in project p, with the
// topic outTopic.
var fakePubSub = fakepubsub.New

// published counts the publishes of the message of child key ck.
func published(srv *pstest.Server, ck string) int {
	n := 0
	for _, m := range srv.Messages() {
		if m.Attributes[outbox.ChildKeyAttribute] == ck {
			n++
		}
	}
	return n
}

// running is a relay running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func start(t testing.TB, src relay.Source, c *pubsub.Client, opts relay.Options) *running {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	r, err := relay.New(src, c, &opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- r.Run(ctx) }()
	t.Cleanup(func() { run.stop(t) })
	return run
}

// stop ends the relay and waits for Run.
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	})
}

// givesBack is a Source that closes gaveBack when a Settle first gives a
// message back.
type givesBack struct {
	*model
	gaveBack chan struct{}
	once     sync.Once
}

func (g *givesBack) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	if len(failed) > 0 {
		g.once.Do(func() { close(g.gaveBack) })
	}
	return g.model.Settle(ctx, sent, failed)
}

// Item 7: a publish that takes more than half the lease and then lands
// is waited for. Before, the relay stopped waiting at half the lease and
// gave the message back, the other relay took it and published it, and
// the first publish landed too: two live relays, one message published
// twice.
func TestSlowPublishIsNotGivenBack(t *testing.T) {
	t.Parallel() // it waits out real time: a lease, or the client's publish timeout
	const lease = 4 * time.Second
	gaveBack := make(chan struct{})
	var first atomic.Bool
	srv, c := fakePubSub(t, onPublish(func(any) (bool, any, error) {
		if first.CompareAndSwap(false, true) {
			// The server is slow: it answers past half the lease, or at
			// once when the relay gave the message back (it would not
			// wait any longer).
			select {
			case <-gaveBack:
			case <-time.After(lease * 55 / 100):
			}
		}
		return false, nil, nil // publish
	}))
	m := newModel()
	p := m.Add(t, "order-1", 0, outbox.Message{Topic: outTopic, Data: []byte("ship")})[0]
	src := &givesBack{model: m, gaveBack: gaveBack}
	start(t, src, c, relay.Options{Lease: lease})
	start(t, src, c, relay.Options{Lease: lease})

	m.Await(t, 30*time.Second, "the message is published and settled", func() bool { return !m.Present(p.ID) })
	for _, f := range m.Failures() {
		if f.ID == p.ID {
			t.Errorf("the relay gave the message back (reason %q) while its publish could still land", f.Reason)
		}
	}
	if n := published(srv, p.ChildKey); n != 1 {
		t.Errorf("the message was published %d times by two live relays, want once", n)
	}
}

// Item 8: Run, cancelled while Pub/Sub stalls a publish, returns within
// StopTimeout and its Settle, and leaves the message held, since its
// publish may still land. Before, it gave the batch back and then waited
// in Publisher.Stop for the stalled publish (up to the client's 60s).
func TestStopDuringStalledPublish(t *testing.T) {
	const stopTimeout = 300 * time.Millisecond
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	_, c := fakePubSub(t, onPublish(func(any) (bool, any, error) {
		once.Do(func() { close(entered) })
		<-release
		return false, nil, nil
	}))
	unstall := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unstall) // before the server closes
	m := newModel()
	p := m.Add(t, "order-1", 0, outbox.Message{Topic: outTopic, Data: []byte("ship"), OrderingKey: "customer-42"})[0]
	r, err := relay.New(m, c, &relay.Options{Lease: 30 * time.Second, StopTimeout: stopTimeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-entered
	cancel()
	stopped := time.Now()
	bound := stopTimeout + 2*time.Second // the Settle is in memory
	select {
	case err := <-done:
		t.Logf("Run returned %v after its ctx ended, the publish still stalled", time.Since(stopped).Round(time.Millisecond))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(bound):
		t.Errorf("Run did not return within %v of its ctx's end while a publish stalled (it waits for the stalled publish)", bound)
		unstall()
		<-done
		t.Logf("Run returned %v after its ctx ended, once the stall ended", time.Since(stopped).Round(time.Millisecond))
	}
	for _, f := range m.Failures() {
		if f.ID == p.ID {
			t.Errorf("the stopping relay gave the message back (reason %q) while its publish could still land", f.Reason)
		}
	}
	if got, err := m.Take(t.Context(), 10, time.Minute); err != nil || len(got) != 0 {
		t.Errorf("Take after the stop = %d messages, %v; want none: the message stays held until its lease lapses", len(got), err)
	}
}

// counter returns the sum of the int64 counter name, over the points
// whose operation attribute is op (any, if op is empty).
func counter(t testing.TB, reader *sdkmetric.ManualReader, name, op string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			d, ok := x.Data.(metricdata.Sum[int64])
			if !ok || x.Name != name {
				continue
			}
			for _, p := range d.DataPoints {
				if v, _ := p.Attributes.Value("operation"); op == "" || v.AsString() == op {
					n += p.Value
				}
			}
		}
	}
	return n
}

// A message Pub/Sub refuses (its topic does not exist) backs off
// exponentially, with jitter, between MinBackoff and MaxBackoff; the
// failure that reaches MaxAttempts gives it up, holding its ordering key
// unless ReleaseDead, counted in idemgate.relay.dead and logged as an
// ERROR without the ordering key. The later message of its key comes back
// untried (no Reason: not counted); a message of a good topic is sent.
func TestRefusedMessagesBackOffAndDie(t *testing.T) {
	const minB, maxB = time.Hour, 4 * time.Hour
	for _, tc := range []struct {
		name        string
		before      int // failures before this one
		maxAttempts int
		releaseDead bool
		dead        bool
		after       [2]time.Duration // the range of Failure.After, when not dead
	}{
		{name: "first failure", before: 0, after: [2]time.Duration{minB / 2, minB}},
		{name: "second failure", before: 1, after: [2]time.Duration{minB, 2 * minB}},
		{name: "capped", before: 5, after: [2]time.Duration{maxB / 2, maxB}},
		{name: "last allowed (default 10)", before: 9, dead: true},
		{name: "last allowed, key released", before: 9, releaseDead: true, dead: true},
		{name: "MaxAttempts 1", before: 0, maxAttempts: 1, dead: true},
		{name: "negative MaxAttempts never gives up", before: 500, maxAttempts: -1, after: [2]time.Duration{maxB / 2, maxB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := fakePubSub(t)
			m := newModel()
			bad := m.Add(t, "order-1", tc.before,
				outbox.Message{Topic: "missing", Data: []byte("a"), OrderingKey: "customer-42"},
				outbox.Message{Topic: "projects/p/topics/missing", Data: []byte("b"), OrderingKey: "customer-42"})
			good := m.Add(t, "order-2", 0, outbox.Message{Topic: outTopic, Data: []byte("c")})[0]
			logs := &logtest.Sink{}
			reader := sdkmetric.NewManualReader()
			run := start(t, m, c, relay.Options{MinBackoff: minB, MaxBackoff: maxB, MaxAttempts: tc.maxAttempts, ReleaseDead: tc.releaseDead,
				Logger: logs.Logger(), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
			m.Await(t, 30*time.Second, "the batch is settled", func() bool { return len(m.Calls()) > 0 })
			run.stop(t)

			calls := m.Calls()
			// A later round may only take the message behind, once its
			// key is released: the refused one waits out its backoff,
			// or is dead.
			var laterDied, laterFailed int64
			for _, c := range calls[1:] {
				if !tc.releaseDead || len(c.Sent) != 0 || len(c.Failed) != 1 || c.Failed[0].ID != bad[1].ID {
					t.Fatalf("Settle %+v after the first: the refused message must wait out its backoff, and its key's later one behind it unless released", c)
				}
				laterFailed++
				if c.Failed[0].Dead {
					laterDied++
				}
			}
			if len(calls[0].Sent) != 1 || calls[0].Sent[0].ID != good.ID {
				t.Errorf("sent %d messages, want the one on a good topic", len(calls[0].Sent))
			}
			if len(calls[0].Failed) != 2 {
				t.Fatalf("failed %d messages, want both of the missing topic", len(calls[0].Failed))
			}
			f, behind := calls[0].Failed[0], calls[0].Failed[1]
			if f.ID != bad[0].ID || !strings.Contains(f.Reason, "NotFound") && !strings.Contains(f.Reason, "not found") {
				t.Errorf("failure %+v: want the first message, with Pub/Sub's reason", f)
			}
			if behind.ID != bad[1].ID || behind.Reason != "" || behind.Dead || behind.After != 0 {
				t.Errorf("the later message of the key: Reason %q, Dead %v, After %v; want it given back untried (not counted)", behind.Reason, behind.Dead, behind.After)
			}
			if f.Dead != tc.dead || f.Dead && f.Release != tc.releaseDead {
				t.Errorf("Dead %v, Release %v; want %v, %v", f.Dead, f.Release, tc.dead, tc.dead && tc.releaseDead)
			}
			if !tc.dead && (f.After < tc.after[0] || f.After > tc.after[1]) {
				t.Errorf("After %v, want within [%v, %v]: MinBackoff doubled per earlier failure, capped, jittered", f.After, tc.after[0], tc.after[1])
			}
			want := laterDied
			if tc.dead {
				want++
			}
			if got := counter(t, reader, "idemgate.relay.dead", ""); got != want {
				t.Errorf("idemgate.relay.dead = %d, want %d", got, want)
			}
			if got := counter(t, reader, "idemgate.relay.failures", "publish"); got != 1+laterFailed {
				t.Errorf("idemgate.relay.failures{operation=publish} = %d, want %d (the message behind is not a failure until it is tried)", got, 1+laterFailed)
			}
			errs := slices.DeleteFunc(logs.Records().Level(slog.LevelError), func(e logtest.Record) bool { return e.Attrs["child_key"] == bad[1].ChildKey })
			if !tc.dead {
				if len(errs) != 0 {
					t.Errorf("ERROR lines %v, want none: nothing died", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("ERROR lines %v, want one for the dead message", errs)
			}
			e := errs[0]
			if a := e.Attrs; a["child_key"] != bad[0].ChildKey || a["topic"] != "missing" || a["attempts"] != fmt.Sprint(tc.before+1) || a["reason"] != f.Reason {
				t.Errorf("ERROR line %v: want child_key, topic, attempts %d and reason", e, tc.before+1)
			}
			if strings.Contains(e.String(), "customer-42") {
				t.Errorf("ERROR line %s names the ordering key", e)
			}
		})
	}
}

// A message larger than a publish request is refused by the client on
// every try: it dies at its first failure, with an ordering key or without
// (the first of its key's share is sent whatever its size).
func TestOversizedMessageDiesAtOnce(t *testing.T) {
	for _, key := range []string{"", "k"} {
		_, c := fakePubSub(t)
		m := newModel()
		ps, err := outbox.Prepare("order-1", []outbox.Message{{Topic: outTopic, Data: []byte("x"), OrderingKey: key}})
		if err != nil {
			t.Fatal(err)
		}
		p := ps[0]
		p.Data = make([]byte, pubsub.MaxPublishRequestBytes)
		m.AddPending(&p, 0)
		run := start(t, m, c, relay.Options{})
		m.Await(t, 30*time.Second, "the batch is settled", func() bool { return len(m.Calls()) > 0 })
		run.stop(t)
		f := m.Failures()
		if len(f) != 1 || !f[0].Dead || f[0].Reason == "" {
			t.Errorf("ordering key %q: failures %v; want the oversized message dead at its first failure, with the client's reason", key, brief(f))
		}
	}
}

// What each answer of Pub/Sub makes of a message: a refusal is a counted
// failure; an answer that does not prove the message unpublished leaves
// it out of Settle, held until its lease lapses, and counted.
func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		code    codes.Code
		refused bool
	}{
		{codes.PermissionDenied, true},
		{codes.InvalidArgument, true},
		{codes.FailedPrecondition, true},
		{codes.DataLoss, false},
		{codes.AlreadyExists, false},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			_, c := fakePubSub(t, onPublish(func(any) (bool, any, error) {
				return true, nil, status.Error(tc.code, "no")
			}))
			m := newModel()
			p := m.Add(t, "order-1", 0, outbox.Message{Topic: outTopic, Data: []byte("a"), OrderingKey: "k"})[0]
			reader := sdkmetric.NewManualReader()
			run := start(t, m, c, relay.Options{MinBackoff: time.Hour, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
			m.Await(t, 30*time.Second, "the publish is answered", func() bool {
				return counter(t, reader, "idemgate.relay.failures", "") > 0
			})
			run.stop(t)
			f := m.Failures()
			if tc.refused {
				if len(f) != 1 || f[0].ID != p.ID || f[0].Reason == "" || f[0].After == 0 {
					t.Errorf("failures %+v; want the message refused, with a reason and a backoff", f)
				}
				return
			}
			if len(f) != 0 {
				t.Errorf("failures %+v; want none: a publish of unknown outcome is left out of Settle", f)
			}
			if got := counter(t, reader, "idemgate.relay.failures", "publish_unknown"); got != 1 {
				t.Errorf("idemgate.relay.failures{operation=publish_unknown} = %d, want 1", got)
			}
			if got, _ := m.Take(t.Context(), 10, time.Minute); len(got) != 0 {
				t.Errorf("Take = %d messages; the message must stay held until its lease lapses", len(got))
			}
		})
	}
}

// A topic's ID and its full name in the client's project are one topic:
// the relay publishes an ordering key's messages on both spellings in one
// request, through one publisher, in order. Before, each spelling had a
// publisher of its own, and the key's messages went in two requests side
// by side.
func TestTopicSpellingsShareAPublisher(t *testing.T) {
	var (
		mu       sync.Mutex // guards requests
		requests [][]string
	)
	_, c := fakePubSub(t, onPublish(func(req any) (bool, any, error) {
		var data []string
		for _, m := range req.(*pubsubpb.PublishRequest).Messages {
			data = append(data, string(m.Data))
		}
		mu.Lock()
		requests = append(requests, data)
		mu.Unlock()
		return false, nil, nil
	}))
	m := newModel()
	var msgs []outbox.Message
	for i, topic := range []string{"out", outTopic, "out", outTopic} {
		msgs = append(msgs, outbox.Message{Topic: topic, OrderingKey: "k", Data: []byte{'0' + byte(i)}})
	}
	m.Add(t, "order-1", 0, msgs...)
	start(t, m, c, relay.Options{})
	m.Await(t, 30*time.Second, "the batch is sent", func() bool { n, _ := m.Backlog(t.Context()); return n == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(requests) != 1 || strings.Join(requests[0], " ") != "0 1 2 3" {
		t.Errorf("publish requests %q; want one request with the key's messages in order, whatever the topic's spelling", requests)
	}
}

// slowTake is a Source whose first Take answers only after delay: a store
// too slow for the lease.
type slowTake struct {
	*model
	delay time.Duration
	once  sync.Once
}

func (s *slowTake) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	ps, err := s.model.Take(ctx, n, lease)
	s.once.Do(func() { time.Sleep(s.delay) })
	return ps, err
}

// A batch whose Take took more than an eighth of the lease is given back
// untried (not counted against its messages), and counted as a lease
// failure: the client's answers could come after the lease lapsed. The
// next, quick Take publishes it.
func TestLateTakeIsGivenBackUntried(t *testing.T) {
	t.Parallel() // it waits out real time: a lease, or the client's publish timeout
	const lease = 800 * time.Millisecond
	srv, c := fakePubSub(t)
	m := newModel()
	p := m.Add(t, "order-1", 0, outbox.Message{Topic: outTopic, Data: []byte("ship")})[0]
	reader := sdkmetric.NewManualReader()
	run := start(t, &slowTake{model: m, delay: lease / 4}, c, relay.Options{Lease: lease,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	m.Await(t, 30*time.Second, "the message is published and settled", func() bool { return !m.Present(p.ID) })
	run.stop(t)
	calls := m.Calls()
	if len(calls) < 2 || len(calls[0].Sent) != 0 || len(calls[0].Failed) != 1 || calls[0].Failed[0].Reason != "" || calls[0].Failed[0].After != 0 {
		t.Fatalf("Settles %+v; want the late batch given back untried first, then sent", calls)
	}
	if got := counter(t, reader, "idemgate.relay.failures", "lease"); got != 1 {
		t.Errorf("idemgate.relay.failures{operation=lease} = %d, want 1", got)
	}
	if n := published(srv, p.ChildKey); n != 1 {
		t.Errorf("published %d times, want once", n)
	}
}

// A publish Pub/Sub never answers is ended by the client at three quarters
// of the lease: its outcome is unknown (the message stays held), and the
// relay learns it before the lease lapses, so publishing never outlives
// the lease.
func TestStalledPublishEndsWithinTheLease(t *testing.T) {
	t.Parallel() // it waits out real time: a lease, or the client's publish timeout
	const lease = 4 * time.Second
	release := make(chan struct{})
	_, c := fakePubSub(t, onPublish(func(any) (bool, any, error) {
		<-release
		return false, nil, nil
	}))
	t.Cleanup(sync.OnceFunc(func() { close(release) })) // before the server closes
	m := newModel()
	m.Add(t, "order-1", 0, outbox.Message{Topic: outTopic, Data: []byte("ship")})
	reader := sdkmetric.NewManualReader()
	run := start(t, m, c, relay.Options{Lease: lease, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	m.Await(t, 30*time.Second, "the client gives up on the publish", func() bool {
		return counter(t, reader, "idemgate.relay.failures", "publish_unknown") > 0
	})
	run.stop(t)
	if got := counter(t, reader, "idemgate.relay.failures", "lease"); got != 0 {
		t.Errorf("idemgate.relay.failures{operation=lease} = %d, want 0: the client must answer a publish before the lease lapses", got)
	}
	if f := m.Failures(); len(f) != 0 {
		t.Errorf("failures %+v; want none: a publish of unknown outcome is left out of Settle", f)
	}
}

// Messages without an ordering key are not held to one request per round:
// however many bytes they make, each is tried in the round that took it
// (the client splits them into requests). pstest refuses the requests over
// gRPC's 4 MiB, which the client retries until its Timeout (an unknown
// outcome: the message stays held); none is given back untried.
func TestUnorderedMessagesAreAllTried(t *testing.T) {
	t.Parallel() // it waits out real time: a lease, or the client's publish timeout
	_, c := fakePubSub(t)
	m := newModel()
	big := make([]byte, 3_500_000)
	for i := range 3 { // 10.5 MB: more than one request holds
		m.Add(t, fmt.Sprint("order-", i), 0, outbox.Message{Topic: outTopic, Data: big})
	}
	run := start(t, m, c, relay.Options{Lease: 4 * time.Second, MinBackoff: time.Hour})
	m.Await(t, 30*time.Second, "the round is settled", func() bool { return len(m.Calls()) > 0 })
	run.stop(t)
	for _, f := range m.Calls()[0].Failed {
		if f.Reason == "" {
			t.Errorf("message %s given back untried; a message without an ordering key is tried in its round", f.ID)
		}
	}
}

// A round sends each ordering key's share in one request, which holds at
// most RequestLimit bytes: a key whose messages come to more sends what
// fits and gives the rest back untried (no Reason: not counted) for a
// later round; a share of exactly the limit goes whole. pstest takes no
// request over gRPC's 4 MiB, so a share sent whole is refused (the client
// retries it until its Timeout), while the 3 MB message sent alone lands.
func TestOrderedKeyShareFitsOneRequest(t *testing.T) {
	t.Parallel() // it waits out the client's publish timeout
	for _, tc := range []struct {
		name  string
		over  int // the share's bytes past RequestLimit
		split bool
	}{
		{"a byte over the limit", 1, true},
		{"exactly the limit", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, c := fakePubSub(t)
			first := outbox.Message{Topic: outTopic, OrderingKey: "k", Data: make([]byte, 3_000_000)}
			second := sizedTo(t, "order-1", first, relay.RequestLimit(outTopic)+tc.over)
			m := newModel()
			ps := m.Add(t, "order-1", 0, first, second)
			reader := sdkmetric.NewManualReader()
			src := &takeTimes{model: m}
			run := start(t, src, c, relay.Options{Lease: 4 * time.Second, MinBackoff: time.Hour, StopTimeout: 100 * time.Millisecond, PollInterval: time.Hour,
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
			waitUntil(t, 30*time.Second, "the round is answered", func() bool {
				return len(m.Calls()) > 0 || counter(t, reader, "idemgate.relay.failures", "publish_unknown") > 0
			})
			if tc.split {
				// Nothing failed: the next round takes the rest at once,
				// not after PollInterval. Under load the 3 MB publish may
				// straggle and settle apart from its round: wait for it.
				m.Await(t, 30*time.Second, "the rest of the key is taken at once", func() bool { return len(src.times()) >= 2 })
				m.Await(t, 30*time.Second, "the 3 MB message is sent", func() bool {
					return slices.ContainsFunc(m.Calls(), func(c outboxmodel.Settled) bool { return len(c.Sent) > 0 })
				})
			}
			run.stop(t)
			var round outboxmodel.Settled // the first round's Settles, with its straggler's
			for _, c := range m.Calls() {
				round.Sent, round.Failed = append(round.Sent, c.Sent...), append(round.Failed, c.Failed...)
			}
			alone := len(round.Sent) == 1 && round.Sent[0].ID == ps[0].ID
			if alone != tc.split {
				t.Errorf("first round sent %d messages; the 3 MB message sent alone: %v, want %v (a share %+d bytes past the limit)", len(round.Sent), alone, tc.split, tc.over)
			}
			if tc.split && (len(round.Failed) != 1 || round.Failed[0].ID != ps[1].ID || round.Failed[0].Reason != "") {
				t.Errorf("first round failed %v; want the second message given back untried", brief(round.Failed))
			}
		})
	}
}

// sizedTo returns a message of first's topic and ordering key whose
// size, as outbox.PublishSize counts it once Prepare named it after
// first under parent, makes the two of them total bytes.
func sizedTo(t testing.TB, parent string, first outbox.Message, total int) outbox.Message {
	t.Helper()
	m := outbox.Message{Topic: first.Topic, OrderingKey: first.OrderingKey}
	size := func(n int) int {
		m.Data = make([]byte, n)
		ps, err := outbox.Prepare(parent, []outbox.Message{first, m})
		if err != nil {
			t.Fatal(err)
		}
		return outbox.PublishSize(ps[0].Message) + outbox.PublishSize(ps[1].Message)
	}
	// The data's length prefix grows with it: search down.
	n := total - size(0)
	for n > 0 && size(n) > total {
		n--
	}
	if got := size(n); got != total {
		t.Fatalf("no message makes %d bytes with the first (nearest %d)", total, got)
	}
	m.Data = make([]byte, n)
	return m
}

// brief describes failures without their data, which %v would print byte
// by byte: megabytes, in the tests of large messages.
func brief(failures []outbox.Failure) []string {
	var out []string
	for _, f := range failures {
		out = append(out, fmt.Sprintf("{ID %s, Reason %q, Dead %v, After %v}", f.ID, f.Reason, f.Dead, f.After))
	}
	return out
}

// idemgate.relay.lag is the time from a message's enqueue to Pub/Sub's
// acknowledgement of its publish: the time it waited in the outbox and the
// publish's own.
func TestLagRunsFromEnqueueToAck(t *testing.T) {
	const slow = 300 * time.Millisecond
	_, c := fakePubSub(t, onPublish(func(any) (bool, any, error) {
		time.Sleep(slow) // a slow server, not synchronisation
		return false, nil, nil
	}))
	m := newModel()
	reader := sdkmetric.NewManualReader()
	enqueued := time.Now()
	p := m.Add(t, "order-1", 0, outbox.Message{Topic: outTopic, Data: []byte("ship")})[0]
	run := start(t, m, c, relay.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	m.Await(t, 30*time.Second, "the message is published and settled", func() bool { return !m.Present(p.ID) })
	run.stop(t)
	bound := time.Since(enqueued)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var lags []float64
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			if d, ok := x.Data.(metricdata.Histogram[float64]); ok && x.Name == "idemgate.relay.lag" {
				for _, dp := range d.DataPoints {
					lags = append(lags, dp.Sum)
				}
			}
		}
	}
	if len(lags) != 1 || lags[0] < slow.Seconds() || lags[0] > bound.Seconds() {
		t.Errorf("idemgate.relay.lag recorded %v s, want one value within [%v, %v]: from the enqueue to Pub/Sub's answer", lags, slow.Seconds(), bound.Seconds())
	}
}

// takeTimes is a Source that records when each Take started.
type takeTimes struct {
	*model
	mu sync.Mutex // guards at
	at []time.Time
}

func (s *takeTimes) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return s.model.Take(ctx, n, lease)
}

func (s *takeTimes) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at)
}

// The relay waits PollInterval (default DefaultPollInterval) before it
// takes again after a round that took nothing, and after a round with a
// refused publish or one of unknown outcome: publishing again at once
// would most likely fail again.
func TestWaitsPollInterval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		messages int
		answer   codes.Code    // Pub/Sub's answer to a publish
		poll     time.Duration // PollInterval
		want     time.Duration // the least time between the Takes
	}{
		{"empty outbox", 0, codes.OK, 0, relay.DefaultPollInterval},
		{"unknown outcome", 1, codes.DataLoss, 300 * time.Millisecond, 300 * time.Millisecond},
		{"refused", 1, codes.PermissionDenied, 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, c := fakePubSub(t, onPublish(func(any) (bool, any, error) {
				return true, nil, status.Error(tc.answer, "no")
			}))
			m := newModel()
			for i := range tc.messages {
				m.Add(t, fmt.Sprint("order-", i), 0, outbox.Message{Topic: outTopic, Data: []byte("ship")})
			}
			src := &takeTimes{model: m}
			// Not start, which sets a short PollInterval.
			r, err := relay.New(src, c, &relay.Options{PollInterval: tc.poll, MinBackoff: time.Hour, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			m.Await(t, 30*time.Second, "the relay takes again", func() bool { return len(src.times()) >= 2 })
			cancel()
			<-done
			at := src.times()
			if gap := at[1].Sub(at[0]); gap < tc.want {
				t.Errorf("the relay took again %v after the first round; want it to wait PollInterval (%v)", gap, tc.want)
			}
		})
	}
}

// A message's backoff doubles from MinBackoff (default DefaultMinBackoff)
// up to MaxBackoff (default DefaultMaxBackoff), jittered down to half; the
// shortest allowed, one nanosecond, draws zero or one.
func TestBackoffOptions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max time.Duration // MinBackoff, MaxBackoff
		before   int
		after    [2]time.Duration
	}{
		{"default, first failure", 0, 0, 0, [2]time.Duration{relay.DefaultMinBackoff / 2, relay.DefaultMinBackoff}},
		{"default, capped", 0, 0, 20, [2]time.Duration{relay.DefaultMaxBackoff / 2, relay.DefaultMaxBackoff}},
		{"one nanosecond", time.Nanosecond, time.Nanosecond, 0, [2]time.Duration{0, time.Nanosecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := fakePubSub(t)
			m := newModel()
			m.Add(t, "order-1", tc.before, outbox.Message{Topic: "missing", Data: []byte("a")})
			run := start(t, m, c, relay.Options{MinBackoff: tc.min, MaxBackoff: tc.max, MaxAttempts: -1})
			m.Await(t, 30*time.Second, "the batch is settled", func() bool { return len(m.Calls()) > 0 })
			run.stop(t)
			f := m.Failures()
			if len(f) == 0 || f[0].Reason == "" || f[0].After < tc.after[0] || f[0].After > tc.after[1] {
				t.Errorf("failures %v; want the first backing off within [%v, %v]", brief(f), tc.after[0], tc.after[1])
			}
		})
	}
}

// A stopping relay waits for the answers of its publishes in flight, up to
// StopTimeout (default DefaultStopTimeout), and settles them: a message
// Pub/Sub acknowledges after the stop is marked sent, not left held to be
// published again once its lease lapses.
func TestStopSettlesAnswersInFlight(t *testing.T) {
	const slow = 300 * time.Millisecond
	entered := make(chan struct{})
	var once sync.Once
	srv, c := fakePubSub(t, onPublish(func(any) (bool, any, error) {
		once.Do(func() { close(entered) })
		time.Sleep(slow) // a slow server, not synchronisation
		return false, nil, nil
	}))
	m := newModel()
	p := m.Add(t, "order-1", 0, outbox.Message{Topic: outTopic, Data: []byte("ship")})[0]
	run := start(t, m, c, relay.Options{})
	<-entered
	run.stop(t)
	if m.Present(p.ID) {
		t.Errorf("the message Pub/Sub acknowledged after the stop is still in the outbox; want it settled as sent")
	}
	if n := published(srv, p.ChildKey); n != 1 {
		t.Errorf("published %d times, want once", n)
	}
}

// A key whose publish the client keeps retrying (Pub/Sub answers
// Unavailable) delays only itself: the round stops waiting for it after
// the straggle, settles the others and goes on taking and sending; the
// straggler settles once answered, and its key's later message follows it,
// in order, never before.
func TestSlowKeyDelaysOnlyItself(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	srv, c := fakePubSub(t, onPublish(func(req any) (bool, any, error) {
		r, ok := req.(*pubsubpb.PublishRequest)
		if !ok || len(r.Messages) == 0 || r.Messages[0].OrderingKey != "slow" || !failing.Load() {
			return false, nil, nil
		}
		return true, (*pubsubpb.PublishResponse)(nil), status.Error(codes.Unavailable, "this key's publishes fail for now")
	}))
	m := newModel()
	slow := m.Add(t, "order-1", 0,
		outbox.Message{Topic: outTopic, Data: []byte("s1"), OrderingKey: "slow"},
		outbox.Message{Topic: outTopic, Data: []byte("u1")})
	// The client retries the slow key's publish for 9 s (three quarters of
	// the lease); the round waits for it 0.75 s (a sixteenth).
	start(t, m, c, relay.Options{Lease: 12 * time.Second, BatchSize: 2})
	const soon = 4 * time.Second
	m.Await(t, soon, "the unordered message of the slow key's round is settled", func() bool { return settledSent(m, slow[1].ID) })
	// A later commit: its messages are taken and sent while the slow
	// key's publish is still retried.
	later := m.Add(t, "order-2", 0,
		outbox.Message{Topic: outTopic, Data: []byte("s2"), OrderingKey: "slow"},
		outbox.Message{Topic: outTopic, Data: []byte("k1"), OrderingKey: "other"},
		outbox.Message{Topic: outTopic, Data: []byte("u2")})
	m.Await(t, soon, "the later round's other messages are settled", func() bool {
		return settledSent(m, later[1].ID) && settledSent(m, later[2].ID)
	})
	if settledSent(m, slow[0].ID) || published(srv, slow[0].ChildKey) != 0 || published(srv, later[0].ChildKey) != 0 {
		t.Fatal("the slow key's messages went through while its publishes failed")
	}
	failing.Store(false)
	m.Await(t, 30*time.Second, "the slow key's messages are settled", func() bool {
		return settledSent(m, slow[0].ID) && settledSent(m, later[0].ID)
	})
	var order []string
	for _, msg := range srv.Messages() {
		if msg.OrderingKey == "slow" {
			order = append(order, string(msg.Data))
		}
	}
	if !slices.Equal(order, []string{"s1", "s2"}) {
		t.Errorf("the slow key's messages were published as %q, want [s1 s2], each once", order)
	}
}

// settledSent reports whether m settled the message id as sent.
func settledSent(m *model, id string) bool {
	for _, c := range m.Calls() {
		for _, p := range c.Sent {
			if p.ID == id {
				return true
			}
		}
	}
	return false
}
