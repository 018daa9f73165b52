package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"go.opentelemetry.io/otel/metric"

	"github.com/idemgate/idemgate/outbox"
)

// Source is an outbox a relay publishes from: a store's, such as
// sqlstore.Store.Outbox. Its methods are safe for concurrent use, also by
// relays in other processes.
type Source interface {
	// Take hands out at most n committed, unsent messages, oldest first,
	// each held for lease: no other Take returns it until the lease lapses
	// or Settle gives it back. A message of an ordering key comes out only
	// with every earlier unsent message of its topic and key before it in
	// the same result. All have the same Token; empty means nothing to take.
	Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error)

	// Settle ends a Take. It deletes sent (even past their lease), but
	// only as they were taken: a message written anew under the same child
	// key since stays. It gives back failed, as each outbox.Failure says,
	// those the Take still holds. A message in neither stays held until its
	// lease lapses. An error leaves every message as it was.
	Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error

	// Backlog returns how many messages are committed and unsent, held
	// or not.
	Backlog(ctx context.Context) (int64, error)
}

// DeadLetters is implemented by a Source that keeps the messages a relay
// gave up on (outbox.Failure.Dead), for an operator to list and revive.
type DeadLetters interface {
	// Dead returns up to n dead messages, oldest first.
	Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error)

	// Revive makes the dead messages of ids (DeadMessage.ID) takeable at
	// once, attempts counted from zero, and returns how many it revived.
	Revive(ctx context.Context, ids ...string) (int, error)
}

// Waker is implemented by a Source that can signal committed messages,
// so that a relay does not wait out its poll interval.
type Waker interface {
	// Listen calls wake (which does not block) once as soon as it listens
	// and each time messages may have been committed, until ctx ends
	// (returning ctx.Err()) or listening fails (the relay polls, then calls
	// it again). A source that cannot listen returns an error matching
	// errors.ErrUnsupported at once: the relay then only polls.
	Listen(ctx context.Context, wake func()) error
}

// Options configures a Relay. The zero value means the defaults.
type Options struct {
	// BatchSize is the most messages one Take hands out; a relay holds up
	// to two batches in memory. Default 100 (docs/benchmarks.md, "Relay
	// throughput", for larger ones).
	BatchSize int

	// Lease is how long a relay holds the messages it took; a dead relay's
	// pass to the others after it. Its publishers' PublishSettings.Timeout
	// is three quarters of it. Default 30s.
	Lease time.Duration

	// PollInterval is how often a relay looks for messages when it is not
	// woken up. Default 1s.
	PollInterval time.Duration

	// MinBackoff and MaxBackoff bound how long a refused message waits
	// before it is taken again: MinBackoff after its first failure,
	// doubling up to MaxBackoff, each drawn between half of it and all of
	// it. Defaults 1s and 5m.
	MinBackoff, MaxBackoff time.Duration

	// MaxAttempts is how many failed publishes a message is allowed
	// before it is given up, kept for an operator ([DeadLetters]). Zero
	// means 10; negative, never. A message refused whatever the attempt
	// (oversized) dies at its first failure.
	MaxAttempts int

	// ReleaseDead lets the later messages of a dead message's ordering key
	// be published past it. By default they wait until an operator revives
	// or deletes it, as Pub/Sub stops a key whose publish failed.
	ReleaseDead bool

	// StopTimeout bounds how long Run, once its ctx ended, waits for the
	// answers in flight; an unanswered message stays held until its lease
	// lapses. Default 5s.
	StopTimeout time.Duration

	// Logger receives the relay's log lines. Default slog.Default().
	Logger *slog.Logger

	// Name, when set, is the attribute "source" of the relay's metrics,
	// to tell apart the relays of several outboxes in one process.
	Name string

	// MeterProvider receives the relay's metrics: idemgate.relay.lag,
	// .published, .backlog, .oldest_age and .dead_messages (the last two
	// from a [Stater]), .failures (by operation) and .dead, described in
	// docs/design.md ("The relay's rounds"). Default: the global provider.
	MeterProvider metric.MeterProvider
}

// Relay publishes the messages of one Source. Run it once per process;
// several processes may relay one Source at once.
type Relay struct {
	src      Source
	pub      *pubsub.Client
	opts     Options
	tel      *telemetry
	repeats  *repeats  // thins out the lines of failures that repeat
	suspects *suspects // messages to publish alone
}

// Defaults of Options.
const (
	DefaultBatchSize    = 100
	DefaultLease        = 30 * time.Second
	DefaultPollInterval = time.Second
	DefaultMinBackoff   = time.Second
	DefaultMaxBackoff   = 5 * time.Minute
	DefaultMaxAttempts  = 10
	DefaultStopTimeout  = 5 * time.Second
)

// settleTimeout bounds each Settle, which ignores Run's cancellation.
const settleTimeout = 10 * time.Second

// New returns a Relay that takes messages from src and publishes them
// with pub, whose project resolves topic IDs. A nil opts means the
// defaults. It does no I/O.
func New(src Source, pub *pubsub.Client, opts *Options) (*Relay, error) {
	if src == nil {
		return nil, errors.New("relay: nil Source")
	}
	if pub == nil {
		return nil, errors.New("relay: nil *pubsub.Client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.BatchSize < 0:
		return nil, fmt.Errorf("relay: negative BatchSize %d", o.BatchSize)
	case o.BatchSize == 0:
		o.BatchSize = DefaultBatchSize
	}
	switch {
	case o.Lease < 0:
		return nil, fmt.Errorf("relay: negative Lease %v", o.Lease)
	case o.Lease == 0:
		o.Lease = DefaultLease
	case o.Lease < 10*time.Millisecond:
		return nil, fmt.Errorf("relay: Lease %v is too short to publish anything in", o.Lease)
	}
	switch {
	case o.PollInterval < 0:
		return nil, fmt.Errorf("relay: negative PollInterval %v", o.PollInterval)
	case o.PollInterval == 0:
		o.PollInterval = DefaultPollInterval
	}
	switch {
	case o.MinBackoff < 0 || o.MaxBackoff < 0:
		return nil, fmt.Errorf("relay: negative MinBackoff %v or MaxBackoff %v", o.MinBackoff, o.MaxBackoff)
	case o.MinBackoff == 0:
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.MaxBackoff < o.MinBackoff {
		return nil, fmt.Errorf("relay: MaxBackoff %v is shorter than MinBackoff %v", o.MaxBackoff, o.MinBackoff)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	switch {
	case o.StopTimeout < 0:
		return nil, fmt.Errorf("relay: negative StopTimeout %v", o.StopTimeout)
	case o.StopTimeout == 0:
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	tel, err := newTelemetry(o.MeterProvider, o.Name)
	if err != nil {
		return nil, err
	}
	return &Relay{src: src, pub: pub, opts: o, tel: tel, repeats: newRepeats(o.MinBackoff, o.MaxBackoff), suspects: newSuspects(o.Lease)}, nil
}

// Run relays until ctx ends, then returns ctx.Err(). Store errors and
// failed publishes are logged (a failure that repeats, once per backoff
// step), counted and retried; they do not end Run. Once ctx ended, Run
// waits at most Options.StopTimeout for the answers in flight, settles
// what they tell and returns, within StopTimeout plus 20s. Run may be
// called again after it returned, but not twice at once.
func (r *Relay) Run(ctx context.Context) error {
	unregister, err := r.tel.observe(r.src)
	if err != nil {
		return err
	}
	defer unregister()

	pubs := r.newPublishers()
	defer func() { go pubs.stop() }()
	// The stragglers settle before Run returns, each waiting at most until giveUp.
	defer pubs.late.Wait()

	// giveUp closes StopTimeout after ctx ended.
	giveUp := make(chan struct{})
	stopGiveUp := context.AfterFunc(ctx, func() {
		time.AfterFunc(r.opts.StopTimeout, func() { close(giveUp) })
	})
	defer stopGiveUp()

	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	lctx, cancel := context.WithCancel(ctx)
	defer wg.Wait()
	defer cancel()
	if w, ok := r.src.(Waker); ok {
		wg.Go(func() { r.listen(lctx, w, wake) })
	}

	timer := time.NewTimer(0)
	defer timer.Stop()
	var next <-chan taking // the next round's Take, started early
	defer func() {
		if next != nil {
			r.giveBack(ctx, <-next)
		}
	}()
	for {
		var (
			n   int
			err error
		)
		n, next, err = r.round(ctx, pubs, giveUp, next)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && n > 0 {
			continue // there may be more
		}
		if next != nil {
			r.giveBack(ctx, <-next) // it would wait out the pause
			next = nil
		}
		timer.Reset(r.opts.PollInterval)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-timer.C:
		}
	}
}

// listen runs w's Listen until ctx ends, again after each failure.
func (r *Relay) listen(ctx context.Context, w Waker, wake chan<- struct{}) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	for {
		err := w.Listen(ctx, signal)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errors.ErrUnsupported) {
			r.opts.Logger.DebugContext(ctx, "relay: the source cannot signal new messages; polling only", "error", err)
			return
		}
		r.tel.failed(ctx, opListen)
		r.logFailure(ctx, slog.LevelWarn, failureKind{op: opListen}, "relay: listening for new messages failed; polling until it listens again", "error", err)
		t := time.NewTimer(r.opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// A taking is the outcome of one Take, with when it started and returned.
type taking struct {
	batch           []outbox.Pending
	taken, returned time.Time
	err             error
}

// take runs one Take.
func (r *Relay) take(ctx context.Context) taking {
	t := taking{taken: time.Now()} // the lease runs from a little later: the store's Take
	t.batch, t.err = r.src.Take(ctx, r.opts.BatchSize, r.opts.Lease)
	t.returned = time.Now()
	return t
}

// giveBack gives back untried the batch of an early Take no round will publish.
func (r *Relay) giveBack(ctx context.Context, t taking) {
	if t.err == nil && len(t.batch) > 0 {
		r.settle(ctx, nil, givenBack(t.batch)) // logs and counts its failure
	}
}

// givenBack gives ps back as messages the relay did not try to publish.
func givenBack(ps []outbox.Pending) []outbox.Failure {
	out := make([]outbox.Failure, len(ps))
	for i, p := range ps {
		out[i] = outbox.Failure{Pending: p}
	}
	return out
}

// round takes one batch (or receives it from pre, a Take started early),
// publishes and settles it. It returns how many messages it took, the next
// round's Take when it started one early (a full round of unordered
// messages does), and an error when a step failed or no publish succeeded
// (the relay then waits PollInterval).
func (r *Relay) round(ctx context.Context, pubs *publishers, giveUp <-chan struct{}, pre <-chan taking) (int, <-chan taking, error) {
	var t taking
	if pre != nil {
		t = <-pre
	}
	if pre == nil || t.err == nil && len(t.batch) == 0 {
		// An early Take that found nothing may have met the last Settle's locks.
		t = r.take(ctx)
	}
	if t.err != nil {
		if ctx.Err() == nil {
			r.tel.failed(ctx, opTake)
			r.logFailure(ctx, slog.LevelError, failureKind{op: opTake}, "relay: taking messages failed", "error", t.err)
		}
		return 0, nil, t.err
	}
	r.recovered(ctx, opTake, "")
	batch := t.batch
	if len(batch) == 0 {
		return 0, nil, nil
	}
	if late := time.Since(t.taken); late > r.lateTake() {
		r.tel.failed(ctx, opLease)
		r.logFailure(ctx, slog.LevelWarn, failureKind{op: opLease, code: "late take"}, "relay: taking messages took too long to publish them within their lease; they are given back (a longer Lease avoids this)",
			"took", late, "lease", r.opts.Lease, "messages", len(batch))
		return len(batch), nil, errors.Join(errLate, r.settle(ctx, nil, givenBack(batch)))
	}
	var next <-chan taking
	early := func() {
		if ctx.Err() != nil || len(batch) < r.opts.BatchSize || slices.ContainsFunc(batch, func(p outbox.Pending) bool { return p.OrderingKey != "" }) {
			return // the outbox is drained, or the batch holds keys back
		}
		ch := make(chan taking, 1)
		go func() { ch <- r.take(ctx) }()
		next = ch
	}
	sent, failed, unknown, late := r.publish(ctx, pubs, batch, t.taken, t.returned, giveUp, early)
	if len(late) > 0 {
		pubs.late.Go(func() { r.awaitLate(ctx, late, t.taken, t.returned, giveUp) })
	}
	var err error
	if len(sent) == 0 && (unknown > 0 || slices.ContainsFunc(failed, func(f outbox.Failure) bool { return f.Reason != "" })) {
		// Nothing went through: publishing again at once would most
		// likely fail again.
		err = errPublish
	}
	if len(sent) == 0 && len(failed) == 0 {
		return len(batch), next, err
	}
	return len(batch), next, errors.Join(err, r.settle(ctx, sent, failed))
}

// settle settles a round, on a context that outlives ctx's cancellation.
func (r *Relay) settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	err := r.src.Settle(sctx, sent, failed)
	if err != nil {
		r.tel.failed(ctx, opSettle)
		r.logFailure(ctx, slog.LevelError, failureKind{op: opSettle}, "relay: marking messages sent failed; they will be published again once their lease lapses",
			"sent", len(sent), "unsent", len(failed), "error", err)
		return err
	}
	r.recovered(ctx, opSettle, "")
	return nil
}

// errPublish says that a round could not publish some of its messages;
// errLate that its Take left too little of the lease to publish in.
var (
	errPublish = errors.New("relay: some publishes failed")
	errLate    = errors.New("relay: Take took too long")
)
