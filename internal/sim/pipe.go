package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/pull"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// PipeBackend is stage A's store and its outbox, for the pipeline family.
type PipeBackend struct {
	Name string
	// Test is the test that runs the backend, for the replay line.
	Test string
	// Store is stage A's store; it must implement store.Inspector (the
	// operator's Forget).
	Store store.Store
	// Complete completes c with msgs in one transaction of the store's
	// (its CompleteTx), then commits it, or rolls it back when commit is
	// false. It returns an error matching store.ErrFenced when c no
	// longer owns its record, and Prepare's error when a message is
	// refused.
	Complete func(ctx context.Context, c store.Claim, msgs []outbox.Message, commit bool) error
	// Source is the store's outbox. When it implements relay.DeadLetters,
	// dead messages are read from it.
	Source relay.Source
	// Lease is the relays' lease, the unit of the run's durations.
	Lease time.Duration
	// Prefix goes before every parent key, so that runs sharing a store
	// never meet.
	Prefix string
	// Replaces says that the store keeps one message per child key (the
	// Google stores: an entity or document named by it), so that a
	// version committed again under a child key (its parent forgotten by
	// an operator and completed anew) replaces an earlier one not yet
	// published, which is then never published: the child key still
	// reaches stage B, once, with the later data. A SQL outbox keeps both
	// versions, one row each, and publishes both.
	Replaces bool
	// DelayBound, if set, replaces the pipe-delay bound (in leases) for a
	// store slower than the model under load.
	DelayBound float64
	// Burst runs a scenario's slow Pub/Sub burst; without it the burst is
	// left out. Its batches of up to 48 messages are for a store that
	// takes them within an eighth of the lease with six runs at once on a
	// loaded machine (the model); a database then gives its batches back
	// untried, and the burst only loads it.
	Burst bool
}

// The rules of the pipeline family; see docs/testing.md, "Model and rules".
const (
	rulePipeLost    = "pipe-lost"    // a committed message neither reached stage B nor is dead (nor waits behind a dead one)
	rulePipeRepeat  = "pipe-repeat"  // a child key effected twice by stage B
	rulePipePhantom = "pipe-phantom" // a message of a rolled-back or fenced-out attempt reached stage B
	rulePipeFenced  = "pipe-fenced"  // a fenced-out attempt's CompleteTx committed
	rulePipeOrder   = "pipe-order"   // stage B effected a key's messages out of commit order
	rulePipeDup     = "pipe-dup"     // a message published twice with no lapsed lease to excuse it
	rulePipeUnpub   = "pipe-unpublished"
	rulePipeDead    = "pipe-dead"       // a message died with no injected failure, or with no reason
	rulePipeDelay   = "pipe-delay"      // a free message waited past the bound
	rulePipeStop    = "pipe-stop"       // a relay's Run returned late once its context ended
	rulePipeTake    = "pipe-take-order" // a Take handed out a message while an earlier one of its key was held or backing off
)

// pipeHorizon bounds a run, in leases.
const pipeHorizon = 60

// pipeDelayBound is how long a message whose key has nothing ahead of it
// may wait to be published, in leases (plus the time Pub/Sub stalled
// meanwhile): a relay busy with a batch waits at most a lease for its
// publishes, takes again within a poll interval; a relay that died holds
// its batch a lease. Five leases leave room for a loaded machine.
const pipeDelayBound = 5

// pipeVersion is one write of an outbox message: a (parent, name, attempt)
// whose data is its tag.
type pipeVersion struct {
	tag      string
	parent   *PipeParent
	msg      *PipeMsg
	childKey string
	order    string // topic ID + ordering key; "" unordered
	seq      int    // commit order, 0 when never committed
	phantom  string // why it never committed: rollback, fenced out
	at       time.Duration
	landings []time.Duration
	diedAt   time.Duration
	dead     bool
	holds    bool
	reason   string
	// The checker's shadow of the store's hold on it, from the Takes and
	// Settles the relays saw: the Take that holds it and until when (on
	// this host's clock, read after the store answered), and the end of
	// its backoff.
	heldBy       string
	heldUntil    time.Time
	backoffUntil time.Time
	// lateTakes counts its Takes that took more than an eighth of the
	// lease, whose batches the relay gives back untried: a store slower
	// than the lease allows delays it, which pipe-delay then forgives.
	lateTakes int
	// superseded: a later version of its child key replaced it in the
	// store before it was published (PipeBackend.Replaces).
	superseded bool
	// refusedWith counts the publish requests carrying it that the run
	// made fail (for another message's plan, perhaps: Pub/Sub refuses a
	// request whole).
	refusedWith int
}

// pipeWorld is one pipeline run.
type pipeWorld struct {
	sc     *PipeScenario
	b      *PipeBackend
	L      time.Duration
	start  time.Time
	root   context.Context
	stop   context.CancelFunc
	ropts  relay.Options
	client *pubsub.Client

	commitMu sync.Mutex // serialises stage A's commits: their order is the run's commit order
	// opsMu serialises the relays' Takes and Settles with their notes, so
	// that the notes follow the store's order.
	opsMu sync.Mutex

	mu       sync.Mutex // guards the fields below
	versions map[string]*pipeVersion
	seq      int
	tries    map[string]int  // publish requests per tag
	stalled  map[string]bool // the tags whose stall happened
	stalls   [][2]time.Duration
	effects  map[string][]pipeEffect // by child key
	effectN  int
	takes    map[string][]takeEvent // by the store's message ID
	idTag    map[string]string
	// takeUntil is when each Take's lease ends (by its token, on this
	// host's clock), and answered when the client last answered a publish
	// request carrying a message of it (see intercept).
	takeUntil  map[string]time.Time
	answered   map[string]time.Time
	parentsOut int
	attempts   map[int]int // by parent index
	violations []Violation
	events     []traceLine

	all sync.WaitGroup
}

type pipeEffect struct {
	tag string
	n   int // the run's effect counter
	at  time.Duration
}

type takeEvent struct {
	take  bool // a Take; else a Settle (sent or failed) by token
	token string
}

func (w *pipeWorld) now() time.Duration { return time.Since(w.start) }

func (w *pipeWorld) tracef(key, format string, args ...any) {
	w.mu.Lock()
	w.events = append(w.events, traceLine{at: w.now(), key: key, text: fmt.Sprintf(format, args...)})
	w.mu.Unlock()
}

func (w *pipeWorld) violate(key, rule, text string) {
	v := Violation{Rule: rule, Key: key, At: w.now(), Text: text}
	w.mu.Lock()
	w.violations = append(w.violations, v)
	w.events = append(w.events, v.line())
	w.mu.Unlock()
}

func (w *pipeWorld) sleep(d time.Duration) bool {
	if d <= 0 {
		return w.root.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.root.Done():
		return false
	}
}

func (w *pipeWorld) leases(f float64) time.Duration { return time.Duration(f * float64(w.L)) }

// tagOf is a message's version tag: its data up to the first '|'.
func tagOf(data []byte) string {
	s := string(data[:min(len(data), 200)])
	if i := strings.IndexByte(s, '|'); i >= 0 {
		s = s[:i]
	}
	return s
}

// RunPipeline runs sc on b in real time and checks it.
func RunPipeline(sc *PipeScenario, b *PipeBackend) *Result {
	if !b.Burst {
		sc = sc.withoutBurst()
	}
	w := &pipeWorld{sc: sc, b: b, L: b.Lease, versions: map[string]*pipeVersion{}, tries: map[string]int{}, stalled: map[string]bool{},
		effects: map[string][]pipeEffect{}, attempts: map[int]int{}, takes: map[string][]takeEvent{}, idTag: map[string]string{},
		takeUntil: map[string]time.Time{}, answered: map[string]time.Time{}}
	w.start = time.Now()
	w.root, w.stop = context.WithCancel(context.Background())
	defer w.stop()
	res := &Result{Scenario: &Scenario{Seed: sc.Seed}, Backend: b.Name + " (pipeline)", test: b.Test, desc: sc.String()}
	finish := func() *Result {
		w.mu.Lock()
		defer w.mu.Unlock()
		res.Violations, res.events, res.Elapsed = w.violations, w.events, w.now()
		return res
	}

	srv := pstest.NewServer(pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactorFunc(w.react)})
	defer srv.Close()
	ctx := context.Background()
	client, err := pubsub.NewClient(ctx, pipeProject, option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithGRPCDialOption(grpc.WithUnaryInterceptor(w.intercept)))
	if err != nil {
		w.violate("", ruleHarness, "pubsub.NewClient: "+err.Error())
		return finish()
	}
	defer client.Close()
	w.client = client
	for _, t := range []string{pipeTopicA, pipeTopicB, pipeTopicGone} {
		name := "projects/" + pipeProject + "/topics/" + t
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: name}); err != nil {
			w.violate("", ruleHarness, "CreateTopic: "+err.Error())
			return finish()
		}
		if t == pipeTopicGone {
			continue
		}
		_, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: "projects/" + pipeProject + "/subscriptions/" + t + "-b", Topic: name, AckDeadlineSeconds: 10, EnableMessageOrdering: true})
		if err != nil {
			w.violate("", ruleHarness, "CreateSubscription: "+err.Error())
			return finish()
		}
	}

	// Stage B: a pull subscriber per topic, keyed on the child key.
	stB, err := memstore.New(&memstore.Options{TTL: time.Hour})
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	gB, err := gateway.New(stB, &gateway.Options{Lease: 4 * w.L, Logger: quiet})
	if err != nil {
		panic(err)
	}
	recv := pull.Wrap(gB, w.stageB, &pull.Options{Route: gateway.RouteOptions{Key: gateway.KeyFromChildKey}, Logger: quiet})
	bctx, bstop := context.WithCancel(ctx)
	var bwg sync.WaitGroup
	for _, t := range []string{pipeTopicA, pipeTopicB} {
		bwg.Go(func() {
			if err := client.Subscriber("projects/"+pipeProject+"/subscriptions/"+t+"-b").Receive(bctx, recv); err != nil && bctx.Err() == nil {
				w.tracef("", "stage B receive on %s: %v", t, err)
			}
		})
	}

	w.ropts = pipeRelayOptions(sc, w.L)
	w.ropts.Logger = (&lineLog{warnOnly: true, seen: func(_ context.Context, _ slog.Record, text string) {
		w.tracef("", "relay log: %s", text) // the relays' warnings and errors
	}}).logger()
	for slot := range sc.Relays {
		w.all.Add(1)
		go w.relaySlot(slot)
	}
	w.mu.Lock()
	w.parentsOut = len(sc.Parents)
	w.mu.Unlock()
	for _, p := range sc.Parents {
		w.all.Add(1)
		go w.parent(p)
	}

	deadline := time.Now().Add(w.leases(pipeHorizon))
	for time.Now().Before(deadline) && !w.settled() {
		time.Sleep(w.L / 8)
	}
	// A last lease for late copies (a stalled publish landing), then stop.
	time.Sleep(w.L)
	w.readDead()
	w.stop()
	w.all.Wait()
	bstop()
	bwg.Wait()
	w.finalChecks()
	return finish()
}

type reactorFunc func(req any) (bool, any, error)

func (f reactorFunc) React(req any) (bool, any, error) { return f(req) }

// takeAttribute is the attribute in which a relay process hands each
// message it took to the client: the token of its Take, by which the
// checker knows which lease a publish request serves.
const takeAttribute = "sim-take"

// intercept is the client's call of every RPC. A publish request (each
// try of it, the client's own retries included) takes the scenario's
// Latency on its way, its worker busy meanwhile, as behind a slow network
// or a slow Pub/Sub; intercept notes when the client got its answer, for
// each Take whose messages it carried. A publish answered past its Take's
// lease may land after another Take published the message again.
func (w *pipeWorld) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r, ok := req.(*pubsubpb.PublishRequest)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var err error
	t := time.NewTimer(w.leases(w.sc.Latency))
	select {
	case <-t.C:
		err = invoker(ctx, method, req, reply, cc, opts...)
	case <-ctx.Done():
		t.Stop()
		err = status.FromContextError(ctx.Err()).Err()
	}
	now := time.Now()
	w.mu.Lock()
	var late []string
	for _, m := range r.Messages {
		tok := m.Attributes[takeAttribute]
		if now.After(w.answered[tok]) {
			w.answered[tok] = now
		}
		if until, ok := w.takeUntil[tok]; ok && now.After(until.Add(w.leases(pipeLateAnswer))) {
			late = append(late, tagOf(m.Data))
		}
	}
	w.mu.Unlock()
	for _, tag := range late {
		w.tracef(tag, "client: a publish of it answered (%v) past the lease of the Take that sent it", err)
	}
	return err
}

// pipeLateAnswer is how far past its Take's lease, in leases, the client
// may answer a publish before the Take no longer excuses a second
// landing: the relay bounds each publish to end before the lease does.
const pipeLateAnswer = 0.25

// react is the pstest server's Publish: it fails, stalls or lets through
// each request as the plans of its messages say, and notes the landings.
// It runs under the server's lock: a stall holds the whole server (this
// run's own), as an overloaded Pub/Sub would.
func (w *pipeWorld) react(req any) (bool, any, error) {
	r := req.(*pubsubpb.PublishRequest)
	w.mu.Lock()
	var fail error
	var stall time.Duration
	var tags []string
	for _, m := range r.Messages {
		tag := tagOf(m.Data)
		tags = append(tags, tag)
		w.tries[tag]++
		n := w.tries[tag]
		v := w.versions[tag]
		if v == nil {
			continue
		}
		switch {
		case outbox.TopicID(r.Topic) == pipeTopicGone:
			fail = status.Error(codes.PermissionDenied, "sim: the topic refuses every message")
		case n <= v.msg.ErrTries:
			fail = status.Error(codes.FailedPrecondition, fmt.Sprintf("sim: publish try %d of %d refused", n, v.msg.ErrTries))
		case n <= v.msg.ErrTries+v.msg.Unavailable && fail == nil:
			fail = status.Error(codes.Unavailable, "sim: Pub/Sub unavailable")
		case v.msg.Stall > 0 && !w.stalled[tag]:
			w.stalled[tag] = true
			stall = max(stall, w.leases(v.msg.Stall))
		}
	}
	w.mu.Unlock()
	if fail != nil {
		w.mu.Lock()
		for _, tag := range tags {
			if v := w.versions[tag]; v != nil {
				v.refusedWith++
			}
		}
		w.mu.Unlock()
		w.tracef("", "pubsub: publish of %v fails: %v", tags, fail)
		return true, nil, fail
	}
	if stall > 0 {
		w.tracef("", "pubsub: publish of %v stalls %v", tags, stall)
		w.hold(stall)
	}
	w.mu.Lock()
	at := w.now()
	for _, tag := range tags {
		if v := w.versions[tag]; v != nil {
			v.landings = append(v.landings, at)
		}
		w.events = append(w.events, traceLine{at: at, key: tag, text: "pubsub: lands on " + outbox.TopicID(r.Topic)})
	}
	w.mu.Unlock()
	return false, nil, nil
}

// hold holds the server d, and notes it: pipe-delay allows the time.
func (w *pipeWorld) hold(d time.Duration) {
	from := w.now()
	time.Sleep(d)
	w.mu.Lock()
	w.stalls = append(w.stalls, [2]time.Duration{from, w.now()})
	w.mu.Unlock()
}

// stageB is the body of stage B: it writes its effect, the message's tag,
// to the ledger of its child key.
func (w *pipeWorld) stageB(ctx context.Context, m *pubsub.Message) error {
	ck := m.Attributes[outbox.ChildKeyAttribute]
	tag := tagOf(m.Data)
	w.mu.Lock()
	w.effectN++
	w.effects[ck] = append(w.effects[ck], pipeEffect{tag: tag, n: w.effectN, at: w.now()})
	w.events = append(w.events, traceLine{at: w.now(), key: tag, text: "stage B effect"})
	w.mu.Unlock()
	return nil
}

// parent runs stage A for p: attempts until one commits, then, if p says
// so, an operator's Forget and a redelivery that commits again.
func (w *pipeWorld) parent(p *PipeParent) {
	defer w.all.Done()
	defer func() {
		w.mu.Lock()
		w.parentsOut--
		w.mu.Unlock()
	}()
	if !w.sleep(w.leases(p.At)) {
		return
	}
	key := w.b.Prefix + p.Key
	w.runParent(p, key, p.Faults)
	if !p.Forget || w.root.Err() != nil {
		return
	}
	if !w.sleep(w.leases(p.ForgetAfter)) {
		return
	}
	ok, err := w.b.Store.(store.Inspector).Forget(w.root, key)
	w.tracef("", "operator forgets %s: %v %v", p.Key, ok, err)
	w.runParent(p, key, nil)
}

// nextAttempt numbers p's next attempt.
func (w *pipeWorld) nextAttempt(p *PipeParent) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attempts[p.Index]++
	return w.attempts[p.Index]
}

// runParent claims key until a body of p commits (or finds it DONE).
func (w *pipeWorld) runParent(p *PipeParent, key string, faults []bodyFault) {
	for w.root.Err() == nil {
		c, err := w.b.Store.Claim(w.root, key, w.L, store.ClaimOptions{})
		if err != nil {
			w.tracef("", "%s: claim: %v", p.Key, err)
			w.sleep(w.L / 4)
			continue
		}
		switch c.Status {
		case store.AlreadyDone:
			return
		case store.HeldByOther:
			w.sleep(w.L / 8)
			continue
		}
		f := bodyCommits
		if len(faults) > 0 {
			f, faults = faults[0], faults[1:]
		}
		if w.body(p, c, w.nextAttempt(p), f) {
			return
		}
	}
}

// body runs one stage A attempt under claim c. It reports whether p is
// done (this attempt or a redelivery it started committed).
func (w *pipeWorld) body(p *PipeParent, c store.Claim, attempt int, f bodyFault) bool {
	msgs, vs := w.messages(p, attempt)
	ctx := w.root
	switch f {
	case bodyRollback:
		err := w.complete(ctx, c, msgs, vs, false)
		w.tracef("", "%s a%d: rolled back (%v)", p.Key, attempt, err)
		w.markPhantom(vs, "rolled back")
		w.b.Store.Release(ctx, c)
		return false
	case bodyFenced:
		// A redelivery takes the key over once the lease lapses and
		// commits; then this body, late, tries to commit.
		taken := make(chan struct{})
		var over sync.Once
		var next sync.WaitGroup
		next.Go(func() {
			for w.root.Err() == nil {
				w.sleep(max(time.Until(c.LeaseUntil), 0) + w.L/8)
				c2, err := w.b.Store.Claim(ctx, w.b.Prefix+p.Key, w.L, store.ClaimOptions{})
				if err != nil || c2.Status == store.HeldByOther {
					continue
				}
				over.Do(func() { close(taken) })
				if c2.Status == store.Won {
					n := w.nextAttempt(p)
					msgs2, vs2 := w.messages(p, n)
					if !w.commitRetrying(p, c2, msgs2, vs2, n) {
						w.runParent(p, w.b.Prefix+p.Key, nil)
					}
				}
				return
			}
		})
		defer next.Wait()
		select {
		case <-taken:
		case <-w.root.Done():
			return true
		}
		err := w.complete(ctx, c, msgs, vs, true)
		switch {
		case err == nil:
			w.violate(vs[0].tag, rulePipeFenced, fmt.Sprintf("%s a%d: CompleteTx of a claim taken over by a later one committed", p.Key, attempt))
		case errors.Is(err, store.ErrFenced):
			w.tracef(vs[0].tag, "%s a%d: fenced out, nothing committed", p.Key, attempt)
			w.markPhantom(vs, "fenced out")
		default:
			w.tracef(vs[0].tag, "%s a%d: fenced out: %v", p.Key, attempt, err)
			w.markPhantom(vs, "fenced out")
		}
		return true
	}
	return w.commitRetrying(p, c, msgs, vs, attempt)
}

// commitRetrying commits the attempt's messages; it reports false when the
// claim was lost (the caller claims again).
func (w *pipeWorld) commitRetrying(p *PipeParent, c store.Claim, msgs []outbox.Message, vs []*pipeVersion, attempt int) bool {
	err := w.complete(w.root, c, msgs, vs, true)
	if err != nil && msgs[0].Data != nil && len(msgs[0].Data) > 1<<20 && !errors.Is(err, store.ErrFenced) {
		// Prepare refused the big message: the body sends a small one.
		w.tracef(vs[0].tag, "%s a%d: the big message is refused (%v); sent small", p.Key, attempt, err)
		msgs[0].Data = []byte(vs[0].tag)
		err = w.complete(w.root, c, msgs, vs, true)
	}
	if err != nil {
		w.tracef(vs[0].tag, "%s a%d: commit: %v", p.Key, attempt, err)
		w.markPhantom(vs, "failed: "+err.Error())
		w.b.Store.Release(w.root, c)
		return false
	}
	return true
}

// messages builds attempt's messages of p and registers their versions.
func (w *pipeWorld) messages(p *PipeParent, attempt int) ([]outbox.Message, []*pipeVersion) {
	var msgs []outbox.Message
	var vs []*pipeVersion
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range p.Msgs {
		tag := fmt.Sprintf("%s/%s/a%d", p.Key, m.Name, attempt)
		data := []byte(tag)
		if m.Big {
			// Under the 10 MiB the old check admitted, over what the
			// client publishes: Prepare must refuse it.
			r := rand.New(rand.NewPCG(w.sc.Seed, uint64(p.Index)))
			data = make([]byte, outbox.MaxPublishRequestBytes+r.IntN(400_000))
			copy(data, tag+"|")
		}
		msgs = append(msgs, outbox.Message{Topic: m.Topic, Data: data, OrderingKey: m.OrderingKey, Name: m.Name,
			Attributes: map[string]string{"parent": p.Key}})
		order := ""
		if m.OrderingKey != "" {
			order = outbox.TopicID(m.Topic) + "\x00" + m.OrderingKey
		}
		v := &pipeVersion{tag: tag, parent: p, msg: m, childKey: outbox.ChildKey(w.b.Prefix+p.Key, m.Name), order: order}
		w.versions[tag] = v
		vs = append(vs, v)
	}
	return msgs, vs
}

// complete runs the backend's Complete, serialised with the run's other
// commits so that their order is known, and numbers what committed.
func (w *pipeWorld) complete(ctx context.Context, c store.Claim, msgs []outbox.Message, vs []*pipeVersion, commit bool) error {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	err := w.b.Complete(ctx, c, msgs, commit)
	if err == nil && commit {
		w.mu.Lock()
		for _, v := range vs {
			if w.b.Replaces {
				// The earlier versions' entity is now v's: none of them is
				// held or backs off any more (their Takes' Settles find
				// another version), and one not yet published never will be.
				for _, u := range w.versions {
					if u.childKey != v.childKey || u == v || u.seq == 0 || u.superseded {
						continue
					}
					u.heldBy, u.backoffUntil = "", time.Time{}
					if len(u.landings) == 0 {
						u.superseded = true
						w.events = append(w.events, traceLine{at: w.now(), key: u.tag, text: "replaced in the store by " + v.tag})
					}
				}
			}
			w.seq++
			v.seq, v.at, v.phantom = w.seq, w.now(), ""
			w.events = append(w.events, traceLine{at: v.at, key: v.tag, text: fmt.Sprintf("committed, seq %d", v.seq)})
		}
		w.mu.Unlock()
	}
	return err
}

func (w *pipeWorld) markPhantom(vs []*pipeVersion, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range vs {
		if v.seq == 0 {
			v.phantom = why
		}
	}
}

// relaySlot runs relay processes in one slot: the first with the slot's
// faults, each next one once the previous stopped.
func (w *pipeWorld) relaySlot(slot int) {
	defer w.all.Done()
	for gen := 0; w.root.Err() == nil; gen++ {
		rp := &relayProc{w: w, slot: slot, gen: gen, inner: w.b.Source, fault: w.sc.Relays[slot]}
		if gen > 0 {
			rp.fault.CrashAt, rp.fault.ShutdownAt = 0, 0
		}
		ctx, cancel := context.WithCancel(w.root)
		rp.cancel = cancel
		r, err := relay.New(rp, w.client, &w.ropts)
		if err != nil {
			w.violate("", ruleHarness, "relay.New: "+err.Error())
			cancel()
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(ctx)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			stopped := time.Now()
			rp.mu.Lock()
			rp.stopping = true
			rp.mu.Unlock()
			// Each Settle is bounded by 10s: past that and a little more,
			// Run hangs.
			hang := time.NewTimer(stopBound(w.ropts) + 15*time.Second)
			select {
			case <-done:
			case <-hang.C:
				w.violate("", rulePipeStop, fmt.Sprintf("relay %d.%d: Run has not returned %v after its context's end", slot, gen, time.Since(stopped).Round(time.Millisecond)))
				<-done
			}
			hang.Stop()
			took := time.Since(stopped)
			rp.mu.Lock()
			bound := stopBound(w.ropts) + rp.stopSettle
			rp.mu.Unlock()
			if took > bound {
				w.violate("", rulePipeStop, fmt.Sprintf("relay %d.%d: Run returned %v after its context's end, past its StopTimeout, a lease and the %v its Settles took", slot, gen, took.Round(time.Millisecond), (bound-stopBound(w.ropts)).Round(time.Millisecond)))
			}
			w.tracef("", "relay %d.%d stopped in %v", slot, gen, took.Round(time.Millisecond))
		}
		cancel()
		w.sleep(w.L / 4)
	}
}

// relayProc is one relay process's view of the outbox: the store's clock
// ahead of its own by the slot's skew, a crash before a Settle reaches
// the store, a shutdown while a batch is out. It notes every Take and
// Settle for the publish rules.
type relayProc struct {
	w      *pipeWorld
	slot   int
	gen    int
	inner  relay.Source
	fault  PipeRelay
	cancel context.CancelFunc

	mu      sync.Mutex
	dead    bool
	takes   int
	settles int
	// stopping: its Run's context ended; stopSettle is the time its
	// Settles took since then, which Run's bound allows on top.
	stopping   bool
	stopSettle time.Duration
}

func (rp *relayProc) who() string { return fmt.Sprintf("relay %d.%d", rp.slot, rp.gen) }

func (rp *relayProc) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	start := time.Now()
	rp.mu.Lock()
	dead := rp.dead
	rp.mu.Unlock()
	if dead {
		return nil, errors.New("sim: the relay process is dead")
	}
	w := rp.w
	w.opsMu.Lock()
	defer w.opsMu.Unlock()
	ps, err := rp.inner.Take(ctx, n, lease-w.leases(rp.fault.Skew))
	if err != nil || len(ps) == 0 {
		return ps, err
	}
	w.mu.Lock()
	var tags []string
	now := time.Now()
	late := now.Sub(start) > w.ropts.Lease/8
	margin := w.L / 10
	var bad []string
	w.takeUntil[ps[0].Token] = now.Add(lease - w.leases(rp.fault.Skew))
	for i := range ps {
		p := &ps[i]
		attrs := maps.Clone(p.Attributes)
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[takeAttribute] = p.Token
		p.Attributes = attrs
		tag := tagOf(p.Data)
		w.idTag[p.ID] = tag
		w.takes[p.ID] = append(w.takes[p.ID], takeEvent{take: true, token: p.Token})
		tags = append(tags, tag)
		v := w.versions[tag]
		if v == nil {
			continue
		}
		for _, u := range w.versions {
			if u == v || v.order == "" || u.order != v.order || u.seq == 0 || u.seq > v.seq || u.superseded {
				continue
			}
			if u.heldBy != "" && u.heldBy != p.Token && now.Before(u.heldUntil.Add(-margin)) {
				bad = append(bad, fmt.Sprintf("%s while the earlier %s is held by another Take", tag, u.tag))
			}
			if now.Before(u.backoffUntil.Add(-margin)) {
				bad = append(bad, fmt.Sprintf("%s while the earlier %s backs off", tag, u.tag))
			}
		}
		v.heldBy, v.heldUntil = p.Token, now.Add(lease-w.leases(rp.fault.Skew))
		if late {
			v.lateTakes++
		}
	}
	w.mu.Unlock()
	for _, b := range bad {
		w.violate(strings.SplitN(b, " ", 2)[0], rulePipeTake, rp.who()+" took "+b)
	}
	w.tracef("", "%s takes %v", rp.who(), tags)
	rp.mu.Lock()
	rp.takes++
	shut := rp.fault.ShutdownAt == rp.takes
	rp.mu.Unlock()
	if shut {
		time.AfterFunc(w.leases(rp.fault.ShutdownAfter), func() {
			w.tracef("", "%s is shut down", rp.who())
			rp.cancel()
		})
	}
	return ps, nil
}

func (rp *relayProc) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	w := rp.w
	defer func(start time.Time) {
		rp.mu.Lock()
		if rp.stopping {
			rp.stopSettle += time.Since(start)
		}
		rp.mu.Unlock()
	}(time.Now())
	rp.mu.Lock()
	if len(sent) > 0 {
		rp.settles++
		if rp.fault.CrashAt == rp.settles {
			rp.dead = true
		}
	}
	dead := rp.dead
	rp.mu.Unlock()
	if dead {
		w.tracef("", "%s crashed before its Settle of %d sent, %d failed", rp.who(), len(sent), len(failed))
		rp.cancel()
		return errors.New("sim: the relay process is dead")
	}
	w.opsMu.Lock()
	defer w.opsMu.Unlock()
	// A failure's backoff runs, at the earliest, from the moment Settle
	// was called: the store reads its clock somewhere in the call.
	called := time.Now()
	err := rp.inner.Settle(ctx, sent, failed)
	if err != nil {
		w.tracef("", "%s settle: %v", rp.who(), err)
		return err
	}
	w.mu.Lock()
	for _, p := range sent {
		w.takes[p.ID] = append(w.takes[p.ID], takeEvent{token: p.Token})
		if v := w.versions[tagOf(p.Data)]; v != nil {
			v.heldBy = ""
		}
	}
	for _, f := range failed {
		w.takes[f.ID] = append(w.takes[f.ID], takeEvent{token: f.Token})
		v := w.versions[tagOf(f.Data)]
		if v != nil && v.heldBy == f.Token {
			v.heldBy, v.backoffUntil = "", called.Add(f.After)
		}

		w.events = append(w.events, traceLine{at: w.now(), key: tagOf(f.Data), text: fmt.Sprintf("%s gives back: reason %q, after %v, dead %v, release %v", rp.who(), f.Reason, f.After, f.Dead, f.Release)})
	}
	w.mu.Unlock()
	return nil
}

func (rp *relayProc) Backlog(ctx context.Context) (int64, error) { return rp.inner.Backlog(ctx) }

// Dead implements relay.DeadLetters when the store does.
func (rp *relayProc) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	if d, ok := rp.inner.(relay.DeadLetters); ok {
		return d.Dead(ctx, n)
	}
	return nil, errors.ErrUnsupported
}

// Revive implements relay.DeadLetters when the store does.
func (rp *relayProc) Revive(ctx context.Context, ids ...string) (int, error) {
	if d, ok := rp.inner.(relay.DeadLetters); ok {
		return d.Revive(ctx, ids...)
	}
	return 0, errors.ErrUnsupported
}

// readDead notes the dead messages the store lists.
func (w *pipeWorld) readDead() {
	d, ok := w.b.Source.(relay.DeadLetters)
	if !ok {
		return
	}
	dead, err := d.Dead(context.Background(), 10000)
	if err != nil {
		w.violate("", ruleHarness, "listing the dead messages: "+err.Error())
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range dead {
		if v := w.versions[tagOf(m.Data)]; v != nil && !v.dead {
			v.dead, v.holds, v.reason, v.diedAt = true, m.Holds, m.Reason, m.Died.Sub(w.start)
		}
	}
}

// settled reports whether the run has nothing left to wait for: every
// parent done, every committed message landed (or dead, or behind a dead
// one), every landed child key effected.
func (w *pipeWorld) settled() bool {
	w.readDead()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.parentsOut > 0 {
		return false
	}
	for _, v := range w.versions {
		if v.seq == 0 || v.superseded {
			continue
		}
		if len(v.landings) == 0 && !v.dead && w.blockedBy(v) == nil {
			return false
		}
		if len(v.landings) > 0 && len(w.effects[v.childKey]) == 0 {
			return false
		}
	}
	return true
}

// blockedBy returns the dead message that holds v's key behind it, if
// any. Called with w.mu held.
func (w *pipeWorld) blockedBy(v *pipeVersion) *pipeVersion {
	if v.order == "" {
		return nil
	}
	for _, u := range w.versions {
		if u.dead && u.holds && u.order == v.order && u.seq > 0 && u.seq < v.seq {
			return u
		}
	}
	return nil
}

// lapsedTakes counts the Takes of message id that another Take followed
// before they settled it: their holder's lease lapsed (or it died) with
// the publish's outcome unknown, and a second publish is allowed. A Take
// whose publish the client answered late (see intercept) excuses none:
// the relay let its publish outlive its lease.
func lapsedTakes(evs []takeEvent, late func(token string) bool) int {
	n := 0
	var open []string
	for _, e := range evs {
		if e.take {
			for _, t := range open {
				if !late(t) {
					n++
				}
			}
			open = []string{e.token}
			continue
		}
		open = slices.DeleteFunc(open, func(t string) bool { return t == e.token })
	}
	return n
}

// finalChecks runs the pipeline family's rules on what the run saw.
func (w *pipeWorld) finalChecks() {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Violation
	add := func(key, rule, text string) {
		out = append(out, Violation{Rule: rule, Key: key, At: w.now(), Text: text})
	}
	lapsed := map[string]int{} // by tag
	late := func(tok string) bool {
		until, ok := w.takeUntil[tok]
		return ok && w.answered[tok].After(until.Add(w.leases(pipeLateAnswer)))
	}
	for id, evs := range w.takes {
		lapsed[w.idTag[id]] += lapsedTakes(evs, late)
	}
	byChild := map[string][]*pipeVersion{}
	var committed []*pipeVersion
	for _, v := range w.versions {
		if v.seq > 0 {
			byChild[v.childKey] = append(byChild[v.childKey], v)
			committed = append(committed, v)
		}
	}
	slices.SortFunc(committed, func(a, b *pipeVersion) int { return a.seq - b.seq })
	// Stage B: phantoms and repeats.
	for ck, effs := range w.effects {
		for _, e := range effs {
			if v := w.versions[e.tag]; v == nil || v.seq == 0 {
				why := "unknown to the run"
				if v != nil {
					why = v.phantom
				}
				add(e.tag, rulePipePhantom, fmt.Sprintf("stage B effected %s, a message that never committed (%s)", e.tag, why))
			}
		}
		if len(effs) > 1 {
			add(effs[0].tag, rulePipeRepeat, fmt.Sprintf("stage B effected child key %.12s… %d times (%v)", ck, len(effs), effs))
		}
	}
	for _, v := range w.versions {
		if v.seq == 0 && len(v.landings) > 0 {
			add(v.tag, rulePipePhantom, fmt.Sprintf("%s (%s) was published", v.tag, v.phantom))
		}
	}
	for _, v := range committed {
		injected := v.msg.ErrTries+v.msg.Unavailable > 0 || v.msg.Stall > 0 || outbox.TopicID(v.msg.Topic) == pipeTopicGone
		switch {
		case v.dead && v.reason == "":
			add(v.tag, rulePipeDead, fmt.Sprintf("%s is dead with no reason an operator could read", v.tag))
		case v.dead && !injected:
			add(v.tag, rulePipeDead, fmt.Sprintf("%s died (%q) though Pub/Sub was made to refuse nothing of it", v.tag, v.reason))
		case v.dead:
		case len(v.landings) == 0 && !v.superseded:
			if u := w.blockedBy(v); u == nil {
				add(v.tag, rulePipeUnpub, fmt.Sprintf("%s (seq %d) was committed and never published, nor is it dead", v.tag, v.seq))
			}
		}
		if len(v.landings) > 1+lapsed[v.tag] {
			add(v.tag, rulePipeDup, fmt.Sprintf("%s was published %d times (at %v) and only %d of its Takes lapsed: a relay gave back (or settled) a message whose publish then landed, or let a publish outlive its lease", v.tag, len(v.landings), v.landings, lapsed[v.tag]))
		}
	}
	for ck, vs := range byChild {
		if len(w.effects[ck]) > 0 {
			continue
		}
		gone := true
		for _, v := range vs {
			if !v.dead && !v.superseded && w.blockedBy(v) == nil {
				gone = false
			}
		}
		if !gone {
			add(vs[0].tag, rulePipeLost, fmt.Sprintf("child key of %s never reached stage B, and none of its %d versions is dead or behind a dead message", vs[0].tag, len(vs)))
		}
	}
	// Order: first effects of a key's child keys follow their first commits.
	type first struct {
		seq, eff int
		tag      string
		dead     bool
	}
	firsts := map[string]*first{}
	rewritten := map[string]bool{} // child keys committed more than once
	for _, v := range committed {
		if firsts[v.childKey] != nil {
			rewritten[v.childKey] = true
		}
		f := firsts[v.childKey]
		if f == nil {
			f = &first{seq: v.seq, tag: v.tag}
			if effs := w.effects[v.childKey]; len(effs) > 0 {
				f.eff = effs[0].n
			}
			firsts[v.childKey] = f
		}
		f.dead = f.dead || v.dead
	}
	for i, a := range committed {
		for _, b := range committed[i+1:] {
			fa, fb := firsts[a.childKey], firsts[b.childKey]
			if a.order == "" || a.order != b.order || fa == fb || fa.seq != a.seq || fb.seq != b.seq || fa.dead || fb.dead || fa.eff == 0 || fb.eff == 0 {
				continue
			}
			if w.b.Replaces && (rewritten[a.childKey] || rewritten[b.childKey]) {
				// A child key committed again after an operator's Forget
				// takes the place of its last version in the key's order
				// when it replaced an unpublished one: the operator broke
				// that key's guarantee on purpose.
				continue
			}

			if fb.eff < fa.eff {
				add(b.tag, rulePipeOrder, fmt.Sprintf("stage B effected %s (commit %d) before %s (commit %d) of the same ordering key", b.tag, b.seq, a.tag, a.seq))
			}
		}
	}
	// Delay: a clean message, free of its key's earlier ones, is
	// published within the bound (plus Pub/Sub's stalls meanwhile).
	for _, v := range committed {
		if len(v.landings) == 0 || lapsed[v.tag] > 0 || v.lateTakes > 0 || v.refusedWith > 0 || v.msg.ErrTries+v.msg.Unavailable > 0 || v.msg.Stall > 0 || v.msg.Big {
			continue
		}
		free, ok := v.at, true
		for _, u := range committed {
			if u.seq >= v.seq || u.order == "" || u.order != v.order {
				continue
			}
			switch {
			case len(u.landings) > 0:
				free = max(free, u.landings[0])
			case u.dead:
				free = max(free, u.diedAt)
			default:
				ok = false
			}
		}
		if !ok {
			continue
		}
		land := v.landings[0]
		var stalled time.Duration
		for _, s := range w.stalls {
			stalled += max(0, min(s[1], land)-max(s[0], free))
		}
		bound := w.leases(pipeDelayBound)
		if w.b.DelayBound > 0 {
			bound = w.leases(w.b.DelayBound)
		}
		if wait := land - free; wait > bound+stalled {
			add(v.tag, rulePipeDelay, fmt.Sprintf("%s waited %v to be published once free (bound %v, Pub/Sub stalled %v meanwhile)", v.tag, wait.Round(time.Millisecond), bound, stalled.Round(time.Millisecond)))
		}
	}
	for _, v := range out {
		w.violations = append(w.violations, v)
		w.events = append(w.events, v.line())
	}
}
