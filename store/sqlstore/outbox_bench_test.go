package sqlstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
)

// pollOnly hides a source's Listen: the relay then only polls.
type pollOnly struct{ relay.Source }

// BenchmarkRelayLag measures, on PostgreSQL and the Pub/Sub emulator, the
// time from a CompleteTx's commit to the message's arrival at a
// subscriber, one message at a time: with LISTEN/NOTIFY (the relay polls
// once a minute, so only the notification wakes it) and with polling at
// the default interval. It reports the p50 and p99 of each, in ms.
func BenchmarkRelayLag(b *testing.B) {
	for _, mode := range []string{"listen", "poll-1s"} {
		b.Run(mode, func(b *testing.B) {
			db := postgresBackend.open(b, 4)
			st := outboxStore(b, db, postgresBackend.dialect)
			ps := pubsubClient(b)
			project := strings.Split(ps.Publisher("x").String(), "/")[1]
			topic, err := ps.TopicAdminClient.CreateTopic(b.Context(), &pubsubpb.Topic{Name: "projects/" + project + "/topics/lag"})
			if err != nil {
				b.Fatal(err)
			}
			sub, err := ps.SubscriptionAdminClient.CreateSubscription(b.Context(), &pubsubpb.Subscription{
				Name: "projects/" + project + "/subscriptions/lag", Topic: topic.Name, AckDeadlineSeconds: 30,
			})
			if err != nil {
				b.Fatal(err)
			}
			var (
				mu      sync.Mutex // guards arrived
				arrived = map[string]chan struct{}{}
			)
			waiter := func(ck string) chan struct{} {
				mu.Lock()
				defer mu.Unlock()
				if arrived[ck] == nil {
					arrived[ck] = make(chan struct{})
				}
				return arrived[ck]
			}
			rctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				seen := map[string]bool{}
				ps.Subscriber(sub.Name).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
					m.Ack()
					ck := m.Attributes[outbox.ChildKeyAttribute]
					if !seen[ck] {
						seen[ck] = true
						close(waiter(ck))
					}
				})
			})
			defer func() { stop(); wg.Wait() }()

			var src relay.Source = st.Outbox()
			opts := relay.Options{PollInterval: time.Minute, Logger: slog.New(slog.DiscardHandler)}
			if mode != "listen" {
				src, opts.PollInterval = pollOnly{src}, relay.DefaultPollInterval
			}
			r, err := relay.New(src, ps, &opts)
			if err != nil {
				b.Fatal(err)
			}
			cctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(cctx) }()
			defer func() { cancel(); <-done }()

			ctx := b.Context()
			lags := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				key := fmt.Sprintf("lag-%d", i)
				c, err := st.Claim(ctx, key, time.Minute, store.ClaimOptions{})
				if err != nil || c.Status != store.Won {
					b.Fatal(c, err)
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := st.CompleteTx(ctx, tx, c, outbox.Message{Topic: topic.Name, Data: []byte(key)}); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				select {
				case <-waiter(outbox.ChildKey(key, "0")):
				case <-time.After(time.Minute):
					b.Fatal("a committed message did not arrive within a minute")
				}
				lags = append(lags, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lags)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(lags[len(lags)/2]), "p50-ms")
			b.ReportMetric(ms(lags[min(len(lags)-1, len(lags)*99/100)]), "p99-ms")
		})
	}
}
