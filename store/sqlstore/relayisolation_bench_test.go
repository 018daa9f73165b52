package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
)

// badKey is the ordering key whose publishes fail in
// BenchmarkRelayKeyIsolation.
const badKey = "bad"

// BenchmarkRelayKeyIsolation shows that a failing ordering key delays only
// itself: -relay.n messages on PostgreSQL, one in a hundred on badKey and
// the rest on a thousand other keys or none, drained by one relay into
// pstest twice in one run: once with every publish succeeding (the
// control), once with Pub/Sub failing every publish of badKey, with the
// status code of the sub-benchmark, for its first 10 s. It reports the
// rate of the other messages in both runs, their ratio, and how long
// badKey's messages took to drain (10 s and the backoff at least).
// FailedPrecondition is a refusal the client does not retry; Unavailable
// the client retries itself, until its publish timeout.
func BenchmarkRelayKeyIsolation(b *testing.B) {
	for _, code := range []codes.Code{codes.FailedPrecondition, codes.Unavailable} {
		b.Run("code="+code.String(), func(b *testing.B) {
			var control, failing, drained float64
			for range b.N {
				control += isolationRun(b, code, 0).others
				r := isolationRun(b, code, 10*time.Second)
				failing += r.others
				drained += r.bad.Seconds()
			}
			runs := float64(b.N)
			b.ReportMetric(failing/runs, "others-msgs/s")
			b.ReportMetric(control/runs, "control-msgs/s")
			b.ReportMetric(failing/control, "ratio")
			b.ReportMetric(drained/runs, "bad-drained-s")
		})
	}
}

// isolationResult is one run's figures: the other messages' rate, and
// when the last of badKey's was sent.
type isolationResult struct {
	others float64
	bad    time.Duration
}

// isolationRun drains one outbox while Pub/Sub fails badKey's publishes
// with code for failFor from the relay's start.
func isolationRun(b *testing.B, code codes.Code, failFor time.Duration) isolationResult {
	ctx := b.Context()
	n := *relayMessages
	db := openDB(b, postgresBackend.connector(b), 8)
	st := outboxStore(b, db, postgresBackend.dialect)
	var failUntil atomic.Int64 // unix ns; 0 until the relay starts
	_, ps := fakepubsub.New(b, pstest.ServerReactorOption{FuncName: "Publish", Reactor: failKey{code: code, until: &failUntil}})
	topic := fakepubsub.Topic
	mix := relayMix{"isolation", func(i int) string {
		switch {
		case i%100 == 0:
			return badKey
		case i%2 == 0:
			return ""
		}
		return fmt.Sprintf("k-%d", i%1000)
	}}
	nBad := 0
	for i := range n {
		if mix.key(i) == badKey {
			nBad++
		}
	}
	commitMessages(b, db, st, topic, []byte(strings.Repeat("x", 256)), mix, n)

	src := &keySource{Source: st.Outbox(), others: int64(n - nBad), bad: int64(nBad), othersDone: make(chan struct{}), badDone: make(chan struct{})}
	r, err := relay.New(src, ps, &relay.Options{MinBackoff: time.Second, MaxBackoff: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	failUntil.Store(start.Add(failFor).UnixNano())
	wg.Go(func() {
		if err := r.Run(rctx); !errors.Is(err, context.Canceled) {
			b.Error(err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	var res isolationResult
	for _, c := range []chan struct{}{src.othersDone, src.badDone} {
		select {
		case <-c:
		case <-time.After(2 * time.Minute):
			b.Fatal("the relay did not drain the outbox in 2 minutes")
		}
		if c == src.othersDone {
			res.others = float64(n-nBad) / time.Since(start).Seconds()
		}
	}
	res.bad = time.Since(start)
	return res
}

// failKey fails, with code, every publish of badKey until the instant
// until holds.
type failKey struct {
	code  codes.Code
	until *atomic.Int64
}

func (f failKey) React(req any) (bool, any, error) {
	r, ok := req.(*pubsubpb.PublishRequest)
	if !ok || len(r.Messages) == 0 || r.Messages[0].OrderingKey != badKey || time.Now().UnixNano() >= f.until.Load() {
		return false, nil, nil
	}
	return true, (*pubsubpb.PublishResponse)(nil), status.Error(f.code, "the bad key fails")
}

// keySource closes othersDone once the messages not on badKey were all
// settled as sent, and badDone once badKey's were.
type keySource struct {
	relay.Source
	mu                  sync.Mutex
	others, bad         int64
	othersDone, badDone chan struct{}
}

func (k *keySource) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	err := k.Source.Settle(ctx, sent, failed)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range sent {
		left := &k.others
		done := k.othersDone
		if p.OrderingKey == badKey {
			left, done = &k.bad, k.badDone
		}
		if *left--; *left == 0 {
			close(done)
		}
	}
	return nil
}

// Listen passes the source's notifications on.
func (k *keySource) Listen(ctx context.Context, wake func()) error {
	return k.Source.(relay.Waker).Listen(ctx, wake)
}
