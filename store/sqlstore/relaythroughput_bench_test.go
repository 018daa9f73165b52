package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

var (
	relayMessages = flag.Int("relay.n", 20000, "BenchmarkRelayThroughput: messages drained per run")
	relayBatch    = flag.Int("relay.batch", 0, "BenchmarkRelayThroughput: the relays' BatchSize (0: the default)")
)

// relayMix is how a throughput run's messages are spread over ordering
// keys.
type relayMix struct {
	name string
	key  func(i int) string // the ordering key of the i-th message
}

var relayMixes = []relayMix{
	{"unordered", func(int) string { return "" }},
	{"hot-keys", func(i int) string { return fmt.Sprintf("hot-%d", i%4) }},
	{"many-keys", func(i int) string { return fmt.Sprintf("k-%d", i%1000) }},
}

// BenchmarkRelayThroughput drains -relay.n messages (256 bytes, committed
// 100 per transaction with CompleteTx) from the outbox into an in-process
// Pub/Sub fake (pstest), by one relay and by three, timed from the start
// of the relays to the Settle of the last message. Beside it, in the same
// run, the floor: the same messages published straight from memory with
// the same client. It reports the relay's rate, the floor's, their ratio,
// and the relays' Takes and database statements per message (PostgreSQL:
// counted by a pgx tracer; MariaDB: the server's Questions counter;
// SQLite runs in process, no round trip). See docs/benchmarks.md.
func BenchmarkRelayThroughput(b *testing.B) {
	for _, be := range []backend{postgresBackend, mariadbBackend, sqliteBackend} {
		for _, mix := range relayMixes {
			for _, relays := range []int{1, 3} {
				b.Run(fmt.Sprintf("%s/%s/relays=%d", be.name, mix.name, relays), func(b *testing.B) {
					benchmarkRelayThroughput(b, be, mix, relays)
				})
			}
		}
	}
}

func benchmarkRelayThroughput(b *testing.B, be backend, mix relayMix, relays int) {
	ctx := b.Context()
	n := *relayMessages
	var stmts statementCounter
	conns := 8
	if be.dialect == sqlstore.SQLite {
		conns = 1
	}
	db := openDB(b, stmts.wrap(b, be), conns)
	st := outboxStore(b, db, be.dialect)
	srv, ps := fakepubsub.New(b)
	topic := fakepubsub.Topic
	data := []byte(strings.Repeat("x", 256))

	var relayRate, floorRate, takes, statements, takeShare, settleShare float64
	for range b.N {
		b.StopTimer()
		commitMessages(b, db, st, topic, data, mix, n)
		srv.ClearMessages()
		b.StartTimer()

		before := stmts.read(b, ctx, db)
		src := &countingSource{Source: st.Outbox(), want: int64(n), done: make(chan struct{})}
		start := time.Now()
		rctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range relays {
			r, err := relay.New(src, ps, &relay.Options{BatchSize: *relayBatch, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				if err := r.Run(rctx); !errors.Is(err, context.Canceled) {
					b.Error(err)
				}
			})
		}
		select {
		case <-src.done:
		case <-time.After(5 * time.Minute):
			b.Error("the relays did not drain the outbox in 5 minutes")
		}
		elapsed := time.Since(start)
		cancel()
		wg.Wait()
		statements += float64(stmts.read(b, ctx, db) - before)
		takes += float64(src.takes.Load())
		busy := float64(relays) * float64(elapsed)
		takeShare += float64(src.takeNanos.Load()) / busy
		settleShare += float64(src.settleNanos.Load()) / busy
		relayRate += float64(n) / elapsed.Seconds()
		if got := len(srv.Messages()); got < n {
			b.Fatalf("Pub/Sub holds %d messages, want %d", got, n)
		}

		b.StopTimer()
		srv.ClearMessages()
		floorRate += publishFloor(b, ps, topic, data, mix, n)
		b.StartTimer()
	}
	runs := float64(b.N)
	b.ReportMetric(relayRate/runs, "msgs/s")
	b.ReportMetric(floorRate/runs, "floor-msgs/s")
	b.ReportMetric(relayRate/floorRate, "ratio")
	b.ReportMetric(takes/runs/float64(n), "takes/msg")
	b.ReportMetric(takeShare/runs, "take-share")
	b.ReportMetric(settleShare/runs, "settle-share")
	if be.dialect != sqlstore.SQLite {
		b.ReportMetric(statements/runs/float64(n), "stmts/msg")
	}
}

// commitMessages commits n messages to st's outbox, 100 per transaction,
// each transaction completing a claim of its own.
func commitMessages(b *testing.B, db *sql.DB, st *sqlstore.Store, topic string, data []byte, mix relayMix, n int) {
	ctx := b.Context()
	prefix := uniqueTable()
	for first := 0; first < n; first += 100 {
		c, err := st.Claim(ctx, fmt.Sprintf("%s-%d", prefix, first), time.Minute, store.ClaimOptions{})
		if err != nil || c.Status != store.Won {
			b.Fatal(c, err)
		}
		msgs := make([]outbox.Message, 0, 100)
		for i := first; i < min(n, first+100); i++ {
			msgs = append(msgs, outbox.Message{Topic: topic, OrderingKey: mix.key(i), Data: data})
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.CompleteTx(ctx, tx, c, msgs...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// publishFloor publishes n messages like the outbox's straight from
// memory with ps, as a relay would (one publisher, ordering on when the
// mix has keys), and returns the rate at which Pub/Sub acknowledged them.
func publishFloor(b *testing.B, ps *pubsub.Client, topic string, data []byte, mix relayMix, n int) float64 {
	ctx := b.Context()
	pub := ps.Publisher(topic)
	pub.EnableMessageOrdering = mix.key(0) != ""
	defer pub.Stop()
	start := time.Now()
	results := make([]*pubsub.PublishResult, n)
	for i := range n {
		results[i] = pub.Publish(ctx, &pubsub.Message{Data: data, OrderingKey: mix.key(i),
			Attributes: map[string]string{outbox.ChildKeyAttribute: fmt.Sprintf("floor-%d", i)}})
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// countingSource counts a relay's Takes and closes done once want
// messages were settled as sent.
type countingSource struct {
	relay.Source
	takes       atomic.Int64
	takeNanos   atomic.Int64 // time spent in Take, summed over the relays
	settleNanos atomic.Int64 // time spent in Settle, summed over the relays
	sent, want  int64
	mu          sync.Mutex
	done        chan struct{}
}

func (c *countingSource) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	c.takes.Add(1)
	defer func(t time.Time) { c.takeNanos.Add(int64(time.Since(t))) }(time.Now())
	return c.Source.Take(ctx, n, lease)
}

func (c *countingSource) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	t := time.Now()
	err := c.Source.Settle(ctx, sent, failed)
	c.settleNanos.Add(int64(time.Since(t)))
	if err == nil && len(sent) > 0 {
		c.mu.Lock()
		c.sent += int64(len(sent))
		if c.sent >= c.want && c.sent-int64(len(sent)) < c.want {
			close(c.done)
		}
		c.mu.Unlock()
	}
	return err
}

// Listen passes the source's notifications on, if it has them.
func (c *countingSource) Listen(ctx context.Context, wake func()) error {
	if w, ok := c.Source.(relay.Waker); ok {
		return w.Listen(ctx, wake)
	}
	return errors.ErrUnsupported
}

// statementCounter counts the statements a pool sends: on PostgreSQL with
// a pgx tracer on its connections, on MariaDB by the server's Questions
// counter (every client's: the benchmark runs alone).
type statementCounter struct {
	n     atomic.Int64
	maria bool
}

func (s *statementCounter) wrap(b *testing.B, be backend) driver.Connector {
	switch be.dialect {
	case sqlstore.PostgreSQL:
		cfg, err := pgx.ParseConfig(testenv.PostgresDSN(b))
		if err != nil {
			b.Fatal(err)
		}
		cfg.Tracer = s
		return stdlib.GetConnector(*cfg)
	case sqlstore.MariaDB:
		s.maria = true
	}
	return be.connector(b)
}

func (s *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// read returns the count so far.
func (s *statementCounter) read(b *testing.B, ctx context.Context, db *sql.DB) int64 {
	if !s.maria {
		return s.n.Load()
	}
	var name string
	var v int64
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &v); err != nil {
		b.Fatal(err)
	}
	return v
}

var relayRate = flag.Int("relay.rate", 4000, "BenchmarkRelayLoadLag: messages committed per second")

// BenchmarkRelayLoadLag measures the lag from commit to Pub/Sub's
// acknowledgement under a steady offered load: -relay.rate messages a
// second (unordered, 256 bytes, ten per CompleteTx transaction every
// 1/100 s of the rate) committed to a PostgreSQL outbox for
// -relay.n messages, drained by one relay woken by LISTEN/NOTIFY into
// pstest, which stamps each publish. It reports the p50 and p99 lag and
// the rate the producer reached. Run it at half the saturating rate that
// BenchmarkRelayThroughput reports.
func BenchmarkRelayLoadLag(b *testing.B) {
	ctx := b.Context()
	n := *relayMessages
	db := openDB(b, postgresBackend.connector(b), 8)
	st := outboxStore(b, db, postgresBackend.dialect)
	srv, ps := fakepubsub.New(b)
	topic := fakepubsub.Topic
	data := []byte(strings.Repeat("x", 256))
	var lags []time.Duration
	var offered float64
	for range b.N {
		srv.ClearMessages()
		src := &countingSource{Source: st.Outbox(), want: int64(n), done: make(chan struct{})}
		r, err := relay.New(src, ps, &relay.Options{PollInterval: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := r.Run(rctx); !errors.Is(err, context.Canceled) {
				b.Error(err)
			}
		})
		// Four producers, each committing ten messages every 4/100 s of
		// the rate.
		const perTx, producers = 10, 4
		var mu sync.Mutex
		committed := make(map[string]time.Time, n)
		every := time.Duration(float64(time.Second) * perTx * producers / float64(*relayRate))
		start := time.Now()
		var pg sync.WaitGroup
		for w := range producers {
			pg.Go(func() {
				tick := time.NewTicker(every)
				defer tick.Stop()
				for i := w * perTx; i < n; i += perTx * producers {
					<-tick.C
					key := fmt.Sprintf("%s-%d", uniqueTable(), i)
					c, err := st.Claim(ctx, key, time.Minute, store.ClaimOptions{})
					if err != nil || c.Status != store.Won {
						b.Error(c, err)
						return
					}
					msgs := make([]outbox.Message, 0, perTx)
					for j := range min(perTx, n-i) {
						msgs = append(msgs, outbox.Message{Topic: topic, Data: data, Name: strconv.Itoa(j)})
					}
					if err := commitTx(ctx, db, st, c, msgs); err != nil {
						b.Error(err)
						return
					}
					now := time.Now()
					mu.Lock()
					for _, m := range msgs {
						committed[outbox.ChildKey(key, m.Name)] = now
					}
					mu.Unlock()
				}
			})
		}
		pg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		offered += float64(n) / time.Since(start).Seconds()
		select {
		case <-src.done:
		case <-time.After(time.Minute):
			b.Fatal("the relay did not publish every message within a minute of the last commit")
		}
		cancel()
		wg.Wait()
		for _, m := range srv.Messages() {
			if at, ok := committed[m.Attributes[outbox.ChildKeyAttribute]]; ok {
				lags = append(lags, m.PublishTime.Sub(at))
			}
		}
	}
	slices.Sort(lags)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lags[len(lags)/2]), "p50-ms")
	b.ReportMetric(ms(lags[min(len(lags)-1, len(lags)*99/100)]), "p99-ms")
	b.ReportMetric(offered/float64(b.N), "offered-msgs/s")
}

// commitTx commits msgs with c's completion in one transaction.
func commitTx(ctx context.Context, db *sql.DB, st *sqlstore.Store, c store.Claim, msgs []outbox.Message) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := st.CompleteTx(ctx, tx, c, msgs...); err != nil {
		return err
	}
	return tx.Commit()
}
