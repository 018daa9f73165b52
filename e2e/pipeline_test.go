package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestPipeline is the proof of the outbox: topic orders → stage A (three
// example-run processes on PostgreSQL, POST /pipeline/orders: an order row
// and its shipment in the outbox, in one transaction) → two relays →
// topic shipments → stage B (two processes, POST /pipeline/shipments,
// keyed by the child key) → the supplier. 100 orders come through two
// subscriptions (every order twice, concurrently), 25 are published
// twice, a tenth are rejected (their transaction rolls back), stage A
// processes are SIGKILLed at random and frozen (SIGSTOP) past their lease,
// so that their bodies go on as zombies once thawed, and the first relay
// dies in the middle of a batch, after publishing and before marking sent.
// A frozen body's front end gives up after 3 s, so when it thaws its
// request is cancelled, or its claim was taken over and CompleteTx fences
// it out: either way its transaction commits nothing.
//
// Through the outbox: one row per accepted order, none for a rejected
// one, and each accepted order's shipment reaches the supplier exactly
// once. Publishing from the body instead (PIPELINE_PUBLISH=direct), the
// same storm ships rejected orders (phantoms) and ships orders twice
// under two messageIds (duplicates): the checks catch both, so they can
// fail. The test also reports the publish lag, commit to stage B, with
// the relays woken by LISTEN/NOTIFY and with the relays polling.
func TestPipeline(t *testing.T) {
	t.Parallel()
	t.Run("outbox", func(t *testing.T) {
		t.Parallel()
		r := runPipeline(t, pipelineRun{orders: 100, republished: 25, chaos: true, relays: relayListen})
		if v := r.violations(); len(v) > 0 {
			for _, s := range v[:min(len(v), 20)] {
				t.Error(s)
			}
			t.Errorf("%d violations of exactly-once through the outbox", len(v))
		}
		r.logLag(t, "LISTEN/NOTIFY, under the storm")
	})
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		r := runPipeline(t, pipelineRun{orders: 100, republished: 25, chaos: true, direct: true})
		v := r.violations()
		t.Logf("publishing from the body: %d violations, e.g. %q", len(v), v[:min(len(v), 3)])
		if len(v) == 0 {
			t.Error("publishing from the body gave no duplicate and no phantom shipment: the checks of the outbox run could not fail")
		}
	})
	t.Run("lag", func(t *testing.T) {
		t.Parallel()
		listen := runPipeline(t, pipelineRun{orders: 50, relays: relayListen})
		listen.logLag(t, "LISTEN/NOTIFY, calm")
		polled := runPipeline(t, pipelineRun{orders: 50, relays: relayPoll})
		polled.logLag(t, "polling every 1s, calm")
	})
}

// relayMode is how the relays learn of committed messages.
type relayMode int

const (
	relayListen relayMode = iota // PostgreSQL LISTEN/NOTIFY, polling as a fallback
	relayPoll                    // polling alone, every relay.Options.PollInterval
)

// pipelineRun configures one run of the pipeline.
type pipelineRun struct {
	orders      int       // distinct orders; every tenth is rejected
	republished int       // orders the producer publishes a second time
	chaos       bool      // SIGKILL and freeze stage A, kill a relay mid-batch
	direct      bool      // stage A publishes from the body: no outbox, no relay
	relays      relayMode // with !direct
}

// pipelineResult is what a run saw.
type pipelineResult struct {
	accepted, rejected []string       // order IDs
	rows               map[string]int // order rows per order ID
	sup                *supplier
	shipKeys           map[string][]string // supplier keys per order ID, from stage B's deliveries
	lags               []time.Duration     // enqueued → first delivery at stage B, per shipment
	backlog            int64
	stats              string
}

func runPipeline(t *testing.T, cfg pipelineRun) *pipelineResult {
	t.Helper()
	const lease = "2s"
	dsn := testenv.PostgresDSN(t)
	pcfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*pcfg)
	t.Cleanup(func() { db.Close() })
	suffix := strings.ToLower(rand.Text()[:10])
	records, pipe := "e2e_rec_"+suffix, "e2e_pipe_"+suffix
	t.Cleanup(func() {
		for _, tbl := range []string{records, pipe, pipe + "_outbox", pipe + "_orders"} {
			db.Exec("DROP TABLE IF EXISTS " + tbl)
		}
	})
	storeURL := dsn + "?table=" + records
	if strings.Contains(dsn, "?") {
		storeURL = dsn + "&table=" + records
	}

	b := newBroker(t)
	orders, shipments := b.topic("orders"), b.topic("shipments")
	sup := newSupplier(t, supplierOptions{})
	env := []string{"IDEMGATE_PIPELINE_TABLE=" + pipe, "PIPELINE_TOPIC=shipments"}
	if cfg.direct {
		env = append(env, "PIPELINE_PUBLISH=direct", "GOOGLE_CLOUD_PROJECT="+b.project, "PUBSUB_EMULATOR_HOST="+testenv.PubSubEmulatorHost(t))
	}
	stageA := newFleet(t, 3, fleetConfig{Store: storeURL, Env: env, Lease: lease, Supplier: sup})
	stageB := newFleet(t, 2, fleetConfig{Store: storeURL, Env: env, Supplier: sup})

	// Stage B's door notes which order each shipment is for, and when it
	// first arrived, for the lag.
	res := &pipelineResult{sup: sup, rows: map[string]int{}, shipKeys: map[string][]string{}}
	var mu sync.Mutex // guards res.shipKeys, res.lags and seen
	seen := map[string]bool{}
	doorB := newDoor(t, doorConfig{Route: "/pipeline/shipments", Pick: stageB.pick, Supplier: sup,
		Gate: func(_ context.Context, d delivery) {
			now := time.Now()
			key := shipmentKey(d)
			mu.Lock()
			defer mu.Unlock()
			if seen[key] {
				return
			}
			seen[key] = true
			id := d.Attrs["order_id"]
			res.shipKeys[id] = append(res.shipKeys[id], key)
			if at, err := time.Parse(time.RFC3339Nano, d.Attrs["enqueued_at"]); err == nil {
				res.lags = append(res.lags, now.Sub(at))
			}
		}})
	b.push(shipments, "shipments-b", doorB.URL, defaultAckDeadline)
	// Two subscriptions on orders: every order reaches stage A twice, at
	// about the same time. A frozen process makes its door give up after
	// 3 s, as a front end with a request timeout does; Pub/Sub redelivers.
	fz := &freezer{fleet: stageA, armed: cfg.chaos, busy: map[*instance]bool{}}
	doorA1 := newDoor(t, doorConfig{Route: "/pipeline/orders", Pick: fz.pick})
	doorA2 := newDoor(t, doorConfig{Route: "/pipeline/orders", Pick: fz.pick})
	doorA1.client.Timeout, doorA2.client.Timeout = 3*time.Second, 3*time.Second
	b.push(orders, "orders-a1", doorA1.URL, defaultAckDeadline)
	b.push(orders, "orders-a2", doorA2.URL, defaultAckDeadline)

	// The relays, in this process: the first one dies in the middle of a
	// batch once the storm is under way.
	var (
		relayWG  sync.WaitGroup
		diedOnce atomic.Bool
	)
	relayCtx, stopRelays := context.WithCancel(t.Context())
	defer func() { stopRelays(); relayWG.Wait() }()
	var src *sqlstore.Outbox
	if !cfg.direct {
		st, err := sqlstore.New(db, sqlstore.PostgreSQL, &sqlstore.Options{Table: pipe, Outbox: true})
		if err != nil {
			t.Fatal(err)
		}
		src = st.Outbox()
		// The first relay runs on a context the dying source cancels.
		ctx1, kill1 := context.WithCancel(relayCtx)
		dying := &dyingSource{Source: src, armed: &atomic.Bool{}, die: func() { diedOnce.Store(true); kill1() }}
		dying.armed.Store(cfg.chaos)
		for i, s := range []relay.Source{dying, src} {
			if cfg.relays == relayListen {
				s = listening{s, src}
			} else {
				s = polling{s}
			}
			r, err := relay.New(s, b.client, &relay.Options{Lease: 2 * time.Second, BatchSize: 20})
			if err != nil {
				t.Fatal(err)
			}
			ctx := relayCtx
			if i == 0 {
				ctx = ctx1
			}
			relayWG.Go(func() { r.Run(ctx) })
		}
	}

	// The storm on stage A: random SIGKILLs; and a third of the deliveries
	// freeze the process they go to just after it got them (fz.pick).
	chaosCtx, stopChaos := context.WithCancel(t.Context())
	var chaosWG sync.WaitGroup
	var kills atomic.Int64
	if cfg.chaos {
		chaosWG.Go(func() {
			for pause(chaosCtx, time.Duration(200+mrand.IntN(600))*time.Millisecond) {
				in := stageA.insts[mrand.IntN(len(stageA.insts))]
				if !fz.frozen(in) && stageA.crash(in, anyLife, time.Duration(100+mrand.IntN(300))*time.Millisecond) {
					kills.Add(1)
				}
			}
		})
	}
	defer func() { stopChaos(); chaosWG.Wait(); fz.stop() }()

	// The producer: every order, some twice, in a random order.
	prefix := unique(t)
	var msgs []*pubsub.Message
	for i := range cfg.orders {
		id := fmt.Sprintf("%s-%d", prefix, i)
		amount := "5"
		if i%10 == 9 {
			amount = "0"
			res.rejected = append(res.rejected, id)
		} else {
			res.accepted = append(res.accepted, id)
		}
		m := order(id)
		m.Attributes["amount"] = amount
		msgs = append(msgs, m)
	}
	stream := append(slices.Clone(msgs), msgs[:cfg.republished]...)
	mrand.Shuffle(len(stream), func(i, j int) { stream[i], stream[j] = stream[j], stream[i] })
	var ids []string
	for batch := range slices.Chunk(stream, 20) {
		ids = append(ids, orders.publish(batch...)...)
		pause(t.Context(), 100*time.Millisecond)
	}

	// Stage A takes every order; then the storm ends, the stage comes back
	// and what is left is delivered.
	poll(t.Context(), 40*time.Second, func() error {
		if len(doorA1.unacked(ids))+len(doorA2.unacked(ids)) > 0 {
			return errors.New("orders still unacked")
		}
		return nil
	})
	stopChaos()
	chaosWG.Wait()
	fz.stop()
	eventually(t, 30*time.Second, stageA.allUp)
	settle(t, 60*time.Second, ids, doorA1, doorA2)
	if !cfg.direct {
		var want []string
		for _, id := range res.accepted {
			want = append(want, "shipment:"+outbox.ChildKey("pipeline:order_id:"+id, "shipment"))
		}
		sup.waitDone(t, want, 60*time.Second)
		eventually(t, 30*time.Second, func() error {
			if res.backlog, err = src.Backlog(t.Context()); err != nil || res.backlog > 0 {
				return fmt.Errorf("outbox backlog %d (%v)", res.backlog, err)
			}
			return nil
		})
	}
	eventually(t, 60*time.Second, func() error {
		if q := doorB.quiet(); q < quietPeriod {
			return fmt.Errorf("stage B still receiving (quiet for %v)", q)
		}
		return nil
	})

	// The ledger.
	rows, err := db.QueryContext(t.Context(), "SELECT order_id, COUNT(*) FROM "+pipe+"_orders GROUP BY order_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		res.rows[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	res.stats = fmt.Sprintf("stage A: %d SIGKILLs, %d freezes, %d bodies that failed (zombies thawed after their lease: cancelled or fenced); relay killed mid-batch: %v; door A1: %s; door B: %s",
		kills.Load(), fz.count(), stageA.failedBodies(), diedOnce.Load(), fmtCounts(doorA1), fmtCounts(doorB))
	t.Log(res.stats)
	if cfg.chaos && !cfg.direct && !diedOnce.Load() {
		t.Error("the first relay never died mid-batch: the storm missed a case")
	}
	return res
}

// violations lists every break of exactly-once downstream: an accepted
// order without exactly one row or whose shipment did not reach the
// supplier exactly once, a rejected order with a row or a shipment.
func (r *pipelineResult) violations() []string {
	var out []string
	for _, id := range r.accepted {
		if n := r.rows[id]; n != 1 {
			out = append(out, fmt.Sprintf("order %s has %d rows, want 1", id, n))
		}
		calls := 0
		for _, k := range r.shipKeys[id] {
			calls += r.sup.hits(k)
		}
		if calls != 1 {
			out = append(out, fmt.Sprintf("order %s was shipped %d times (stage B keys %q), want once", id, calls, r.shipKeys[id]))
		}
	}
	for _, id := range r.rejected {
		if n := r.rows[id]; n != 0 {
			out = append(out, fmt.Sprintf("rejected order %s has %d rows, want none", id, n))
		}
		if len(r.shipKeys[id]) > 0 {
			out = append(out, fmt.Sprintf("rejected order %s was shipped (a phantom): stage B keys %q", id, r.shipKeys[id]))
		}
	}
	return out
}

// logLag logs the lag's median and 99th percentile.
func (r *pipelineResult) logLag(t *testing.T, how string) {
	t.Helper()
	if len(r.lags) == 0 {
		t.Errorf("no lag measured (%s)", how)
		return
	}
	l := slices.Clone(r.lags)
	slices.Sort(l)
	q := func(p float64) time.Duration { return l[min(len(l)-1, int(p*float64(len(l))))].Round(time.Millisecond) }
	t.Logf("publish lag, commit → stage B (%s): p50 %v, p99 %v, max %v over %d shipments", how, q(0.50), q(0.99), l[len(l)-1].Round(time.Millisecond), len(l))
}

// shipmentKey is the key stage B gives a shipment: its child key, or its
// messageId when it has none.
func shipmentKey(d delivery) string {
	if ck := d.Attrs[outbox.ChildKeyAttribute]; ck != "" {
		return "shipment:" + ck
	}
	return "shipment:" + d.ID
}

// dyingSource is a relay's source that, once armed, kills its relay at the
// first batch the relay published: it cancels the relay's context and
// reports that marking them sent failed, so the messages stay held until
// their lease lapses, as when a relay process dies between publishing and
// marking sent.
type dyingSource struct {
	relay.Source
	armed *atomic.Bool
	die   func()
}

func (s *dyingSource) Settle(ctx context.Context, sent []outbox.Pending, unsent []outbox.Failure) error {
	if len(sent) > 0 && s.armed.CompareAndSwap(true, false) {
		s.die()
		return errors.New("the relay died before marking its batch sent")
	}
	return s.Source.Settle(ctx, sent, unsent)
}

// polling hides the Listen of a source: its relay polls.
type polling struct{ relay.Source }

// listening gives a source the Listen of w, a PostgreSQL outbox.
type listening struct {
	relay.Source
	w relay.Waker
}

func (l listening) Listen(ctx context.Context, wake func()) error { return l.w.Listen(ctx, wake) }

// freezer is the Pick of stage A's doors that makes zombies: a third of
// the deliveries freeze the process they go to 50 ms later, once its body
// has its claim, for 6 s, three times the lease. The body's lease lapses
// unrenewed, the door gives up after 3 s, Pub/Sub redelivers, another
// process takes the key over, and the frozen body goes on when thawed, a
// zombie. A process that is frozen already is left as it is.
type freezer struct {
	fleet *fleet
	armed bool

	mu      sync.Mutex         // guards the fields below, and orders wg.Add before wg.Wait
	busy    map[*instance]bool // the processes frozen now
	stopped bool               // no more freezes
	n       int                // freezes so far
	wg      sync.WaitGroup     // the freezes under way
}

func (fz *freezer) pick() string {
	u := fz.fleet.pick()
	if !fz.armed || u == "" || mrand.IntN(3) != 0 {
		return u
	}
	var in *instance
	for _, c := range fz.fleet.insts {
		if c.url() == u {
			in = c
		}
	}
	fz.mu.Lock()
	defer fz.mu.Unlock()
	if fz.stopped || fz.busy[in] || in == nil {
		return u
	}
	fz.busy[in] = true
	fz.n++
	fz.wg.Go(func() {
		pause(context.Background(), 50*time.Millisecond)
		in.freeze(context.Background(), 6*time.Second)
		fz.mu.Lock()
		delete(fz.busy, in)
		fz.mu.Unlock()
	})
	return u
}

// stop ends the freezes and waits for the frozen process to be thawed.
func (fz *freezer) stop() {
	fz.mu.Lock()
	fz.stopped = true
	fz.mu.Unlock()
	fz.wg.Wait()
}

// frozen reports whether in is frozen: the storm leaves it to thaw, a
// zombie, rather than killing it.
func (fz *freezer) frozen(in *instance) bool {
	fz.mu.Lock()
	defer fz.mu.Unlock()
	return fz.busy[in]
}

// count returns how many freezes there were.
func (fz *freezer) count() int {
	fz.mu.Lock()
	defer fz.mu.Unlock()
	return fz.n
}

// freeze stops the running process (SIGSTOP) for d, then lets it go on
// (SIGCONT): a process paused past its lease, whose bodies go on as
// zombies. It reports whether a process was running.
func (in *instance) freeze(ctx context.Context, d time.Duration) bool {
	in.mu.Lock()
	cmd := in.cmd
	in.mu.Unlock()
	if cmd == nil || cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	pause(context.WithoutCancel(ctx), d)
	cmd.Process.Signal(syscall.SIGCONT)
	return true
}

// failedBodies counts the log lines of the fleet's processes that report
// a body that failed or lost its claim: in the storm, the zombies, whose
// transaction was cancelled when their front end gave up or fenced out
// when another delivery had taken their key over.
func (f *fleet) failedBodies() int {
	n := 0
	for _, in := range f.insts {
		b, _ := os.ReadFile(in.logPath)
		n += bytes.Count(b, []byte("idemgate: claim lost")) + bytes.Count(b, []byte("idemgate: handler failed"))
	}
	return n
}
