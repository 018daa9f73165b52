package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/store"
)

// Backend is the store a run uses.
type Backend struct {
	Name string
	// Test is the test that runs the backend, for the replay line of a
	// report: "TestSim$" for memstore.
	Test string
	// Store is the shared store. It must implement store.Extender and
	// store.Inspector (every store of this module does).
	Store  store.Store
	Timing Timing
	// Fake says the run is inside a testing/synctest bubble and the store
	// reads time.Now, so that the store's clock is the bubble's.
	Fake bool
	// Tx, if set, is the transactional sink: bodies write their effect
	// and complete their claim in one transaction of the store's.
	Tx TxSink
	// Prefix goes before every message ID and business key, so that runs
	// sharing a store's keyspace never meet.
	Prefix string
	// Purge, if set, deletes the store's expired records (a SQL store's
	// PurgeExpired); the run calls it every lease, as an operator's job
	// would.
	Purge func(ctx context.Context) error
}

// TxSink writes a body's effect in one transaction with the completion of
// its claim (a store's CompleteTx).
type TxSink interface {
	// Commit writes the effect of claim c and completes c in one
	// transaction. It returns an error matching store.ErrFenced, and
	// writes nothing, when c no longer owns its record.
	Commit(ctx context.Context, c store.Claim) error
	// Effects counts the committed effects of key written under fence, or
	// under any fence when fence is 0.
	Effects(ctx context.Context, key string, fence int64) (int, error)
}

// world is one run: the store, the processes, Pub/Sub and the checker's
// state.
type world struct {
	sc    *Scenario
	b     *Backend
	t     Timing
	ext   store.Extender
	insp  store.Inspector
	fail  store.Failer // nil when the store keeps no failures
	logs  *lineLog
	led   ledger
	start time.Time
	root  context.Context // every delivery's parent; cancelled last
	stop  context.CancelFunc
	end   chan struct{} // closed when the run is over: frozen bodies return

	mu         sync.Mutex // guards the fields below, and the mutable fields of keys, messages and deliveries
	procs      []*process // by slot; a crashed process is replaced
	nextProc   int
	keys       map[string]*keyState
	msgs       []*msgState
	violations []Violation
	events     []traceLine
	// won is every claim won on a key (the store's answer, whether or not
	// its reply reached the gateway), in order, for the fence rule.
	won map[string][]store.Claim
	// inflight counts each key's deliveries whose answer is to come, and
	// begun those that ever started.
	inflight map[string]int
	begun    map[string]int
	// inMutex counts the live Mutex bodies of each entity.
	inMutex map[string]map[*delivery]bool
	// texts are the errors and answers the library handed its callers
	// (a verb's error, a CloudEvents result, an HTTP answer's body), for
	// the HideKeys rule.
	texts []string
	// spans records the gateways' spans when the route hides keys, for the
	// HideKeys rule; nil otherwise.
	spans *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider

	live sync.WaitGroup // deliveries whose bodies may still act (not frozen dead)
	all  sync.WaitGroup // every goroutine of the run
}

// keyState is what the checker knows of one store key.
type keyState struct {
	key     string
	running map[*delivery]bool // bodies at work that no stall or crash froze
	// excused: an attempt on the key made a repeated effect unavoidable.
	excused bool
	// undoneAck: a delivery was acked without DONE under SPEC section 3
	// (its body succeeded; Complete could not record it).
	undoneAck bool
	// sawDone: an ack found the record DONE (it may expire before the
	// end, and a later delivery's Claim make a new record).
	sawDone     bool
	doneUntil   time.Time // the latest expiry of a DONE record an ack found
	firstEffect time.Time // when its first effect was written
	// forgotten: an operator forgot the key, on purpose breaking the
	// guarantee for it (its DONE record may be gone).
	forgotten bool
	// forgetsBegun counts the operator's Forgets of the key begun, and
	// forgetsEnded those that returned: a claim whose Claim call began
	// when forgetsEnded was n may have been freed by any Forget past the
	// n-th (see bodyStarts).
	forgetsBegun, forgetsEnded int
	// expired: an effect was written a ttl after the key was seen DONE,
	// when its record may have expired.
	expired bool
	fail    *failState // nil until the key meets a failure
}

// msgState is Pub/Sub's state of one message.
type msgState struct {
	m       *Message
	key     string
	fp      []byte        // its payload fingerprint, when the route takes one
	settled chan struct{} // closed once acked or dead-lettered
	acked   bool
	dead    bool
	// ackedFailed: a delivery of it was acked with AckFailed, its key's
	// work failed for good.
	ackedFailed bool
	attempts    []*delivery // the attempts (not the copies), in order
}

// delivery is one attempt (or copy) in flight.
type delivery struct {
	w     *world
	ms    *msgState
	a     *Attempt
	proc  *process
	start time.Time
	leave sync.Once // w.live.Done, once

	jitterMu sync.Mutex // guards jitter
	jitter   *rand.Rand // the gateway's renewal jitter: see renewJitter

	// Guarded by w.mu.
	fired [opCount]bool
	claim store.Claim
	ran   bool // the body started
	// forgetsAtClaim is the key's forgetsEnded when the delivery's last
	// Claim call began.
	forgetsAtClaim int
	// forgetsAtEnd is the key's forgetsBegun when its body returned.
	forgetsAtEnd int
	wrote        bool // the body wrote its effect
	ok           bool // the body returned success
	fenced       bool // the body returned store.ErrFenced
	frozen       bool // a stall or crash froze the body: a zombie from then on
	late         bool // Pub/Sub stopped waiting for the answer
	refused      bool // the answer met a record of another payload
	held         bool // the answer met a live holder: in progress
	struck       bool // its process paused (a stall) or crashed under it, or an operator's Forget freed its claim
	busy         bool // the body's Mutex met a live holder of its entity
	answer       bool // the callback returned (Ordered: the scheduler may go on)
	acked        bool // it was acked (meaningful once answer is set)
	forged       bool // a forged request: no body may run for it
	lost         bool // a zombie that found its claim lost (Attempt.Zombie)
	failed       bool // the body failed as planned, before any effect: its delivery must not be acked
	stopped      bool // Receive stopped (Attempt.Stop, StopAtClaim)
	claimStopped bool // a Claim of its key was sent once Receive had stopped
	stopRecv     context.CancelFunc
	// Issue 32: poisoned, its body failed as its key is poison; gaveUp,
	// its failure made the record FAILED; metFailed, its Claim found the
	// record FAILED. claimAt is when its last Claim of its key went to
	// the store, and retriesAtClaim the key's Retries begun by then.
	poisoned, gaveUp, metFailed bool
	claimAt                     time.Time
	retriesAtClaim              int
	// failedFP is the fingerprint of the FAILED record its Claim met;
	// contended, its body's Mutex or nested Lock met a live holder;
	// stopFail, its body stopped with Receive. outcome is the last
	// outcome the guard logged for it.
	failedFP  []byte
	contended bool
	stopFail  bool
	outcome   string
}

// fire reports whether a once-only fault of o fires now: the first call.
func (d *delivery) fire(o op) bool {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	if d.fired[o] {
		return false
	}
	d.fired[o] = true
	return true
}

type deliveryKey struct{}

// withDelivery returns ctx carrying d, and gives d its own random source,
// seeded with the seed, the message and the attempt, from which the
// gateway draws the jitter of its lease renewals (renewJitter): a seed
// replays them too.
func withDelivery(ctx context.Context, d *delivery) context.Context {
	stream := uint64(d.ms.m.Index)<<32 | uint64(d.a.N)<<2
	if d.a.Copy {
		stream |= 1
	}
	if d.forged {
		stream |= 2
	}
	d.jitter = rand.New(rand.NewPCG(d.w.sc.Seed, stream))
	return context.WithValue(ctx, deliveryKey{}, d)
}

// renewJitter is the gateways' Options.RenewJitter: the default's draw,
// from the source of the delivery whose claim is renewed, so that the
// draws do not depend on how goroutines interleave.
func renewJitter(ctx context.Context, lease time.Duration) time.Duration {
	n := int64(lease/15) + 1
	d := deliveryFrom(ctx)
	if d == nil {
		return time.Duration(rand.Int64N(n)) - lease/30
	}
	d.jitterMu.Lock()
	defer d.jitterMu.Unlock()
	return time.Duration(d.jitter.Int64N(n)) - lease/30
}

// AttemptFrom returns the attempt a body's context serves, for a TxSink
// that runs the attempt's transaction as planned; nil outside a body.
func AttemptFrom(ctx context.Context) *Attempt {
	if d := deliveryFrom(ctx); d != nil {
		return d.a
	}
	return nil
}

func deliveryFrom(ctx context.Context) *delivery {
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// process is one simulated service instance.
type process struct {
	id    int
	g     *gateway.Gateway // the gateway, for nested Locks
	push  http.Handler     // route.Push
	idem  http.Handler     // route.Idempotent
	ce    func(context.Context, event.Event) error
	pull  func(context.Context, *pubsub.Message)
	auth  http.Handler // pushauth's Middleware in front of idem
	dead  chan struct{}
	once  sync.Once
	slot  int
	inflt map[*delivery]bool // guarded by w.mu

	mu          sync.Mutex
	pausedUntil time.Time // a stall pauses the process's store calls until then
}

// pause makes the process's store calls wait until until.
func (p *process) pause(until time.Time) {
	p.mu.Lock()
	if until.After(p.pausedUntil) {
		p.pausedUntil = until
	}
	p.mu.Unlock()
}

// paused returns when the process's pause ends; zero when it is not
// paused.
func (p *process) paused() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.pausedUntil) {
		return p.pausedUntil
	}
	return time.Time{}
}

func (p *process) crashed() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// newProcess starts a process in slot. Called with w.mu held or before
// the run starts.
func (w *world) newProcess(slot int) *process {
	p := &process{id: w.nextProc, slot: slot, dead: make(chan struct{}), inflt: map[*delivery]bool{}}
	w.nextProc++
	f := &faulty{w: w, inner: w.b.Store, ext: w.ext, proc: p}
	var st store.Store = f
	if w.fail != nil {
		st = failFaulty{f}
	}
	lease := leaseOf(w.sc, w.t)
	opts := &gateway.Options{
		Lease: lease, NoRenew: !w.sc.Renew, SettleTimeout: w.t.settle(),
		Logger: w.logs.logger(), HideKeys: w.sc.HideKeys, RenewJitter: renewJitter,
	}
	w.gatewayFailures(opts)
	if w.tp != nil {
		opts.TracerProvider = w.tp
	}
	g, err := gateway.New(st, opts)
	if err != nil {
		panic("sim: gateway.New: " + err.Error())
	}
	p.g = g
	key := gateway.KeyFromMessageID
	if w.sc.BusinessKey {
		key = gateway.KeyFromAttribute("order_id")
	}
	var fp gateway.FingerprintFunc
	if w.sc.Fingerprint {
		fp = gateway.FingerprintPayload
	}
	route := g.Route(&gateway.RouteOptions{Key: key, Fingerprint: fp, AcceptConflicts: new(w.sc.AcceptConflicts), AckFailed: w.routeAckFailed()})
	p.push = route.Push(w.pushBody)
	p.idem = route.Idempotent(http.HandlerFunc(w.idempotentBody))
	surface := gateway.RouteOptions{Key: key, Fingerprint: fp, AcceptConflicts: new(w.sc.AcceptConflicts)}
	p.ce = cloudevent.Wrap(g, w.cloudEventBody, &cloudevent.Options{Route: surface})
	p.auth = w.verifier().Middleware(p.idem)
	p.pull = pull.Wrap(g, w.pullBody, &pull.Options{Route: surface,
		AckTimeout: -1, InProgressDelay: w.t.Lease / 2})
	return p
}

// process returns the live process in slot.
func (w *world) process(slot int) *process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.procs[slot]
}

// crash kills p: its store calls fail from now on, its bodies freeze, and
// a new process takes its slot. A body of p caught inside a library call
// (a nested Lock's completion, say) may still be scheduled after this, but
// it is a dead process's: it no longer counts as running, and what it does
// later is a zombie's (bodyStarts freezes one that starts after the crash).
func (w *world) crash(p *process, d *delivery) {
	w.mu.Lock()
	p.once.Do(func() {
		close(p.dead)
		w.procs[p.slot] = w.newProcess(p.slot)
		for o := range p.inflt {
			ks := w.key(o.ms.key)
			ks.excused = true
			if o.ran {
				delete(ks.running, o)
				o.frozen = true
			}
		}
	})
	w.mu.Unlock()
	w.tracef(d, "process %d crashed", p.id)
}

// key returns the state of key, creating it. Called with w.mu held.
func (w *world) key(key string) *keyState {
	ks := w.keys[key]
	if ks == nil {
		ks = &keyState{key: key, running: map[*delivery]bool{}}
		w.keys[key] = ks
	}
	return ks
}

// now is the time since the run started.
func (w *world) now() time.Duration { return time.Since(w.start) }

// sleep waits d, or until the run ends; it reports whether d passed.
func (w *world) sleep(d time.Duration) bool { return w.sleepCtx(context.Background(), d) }

// sleepCtx waits d, or until ctx ends, or until the run ends; it reports
// false if the run ended first.
func (w *world) sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-w.end:
		return false
	}
	return true
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%8.3fs", d.Seconds()) }

// failed marks d's body as failed on purpose, before any effect: an ack of
// its delivery would be a failure silently acked (SPEC section 10,
// invariant 3).
func (w *world) failed(d *delivery) {
	w.mu.Lock()
	d.failed = true
	w.mu.Unlock()
}

// stopReceive stops the pull Receive that d's callback runs under: its
// context is cancelled, as Receive's is when the subscriber stops.
func (w *world) stopReceive(d *delivery) {
	w.mu.Lock()
	if d.stopped || d.stopRecv == nil {
		w.mu.Unlock()
		return
	}
	d.stopped = true
	stop := d.stopRecv
	w.mu.Unlock()
	w.tracef(d, "Receive stops")
	stop()
}

func (w *world) stopped(d *delivery) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return d.stopped
}

// noteText keeps the text of err, which the library handed a caller, for
// the HideKeys rule.
func (w *world) noteText(d *delivery, where string, err error) {
	if err == nil || !w.sc.HideKeys {
		return
	}
	text := treeText(err)
	w.mu.Lock()
	w.texts = append(w.texts, whoOf(d)+": "+where+": "+text)
	w.mu.Unlock()
}

// treeText is the text of err and of every error in its tree, which a
// caller may reach with errors.As or Unwrap and print.
func treeText(err error) string {
	var b strings.Builder
	var walk func(error, int)
	walk = func(e error, depth int) {
		if e == nil || depth > 16 {
			return
		}
		if b.Len() > 0 {
			b.WriteString(" | ")
		}
		b.WriteString(e.Error())
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap(), depth+1)
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c, depth+1)
			}
		}
	}
	walk(err, 0)
	return b.String()
}
