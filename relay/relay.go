package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// each for lease: until the lease lapses, or Settle gives it back, no
	// other Take returns it. Messages whose lease lapsed are handed out
	// again (their holder is presumed dead). An empty result means there
	// is nothing to take now.
	//
	// Messages of one topic and ordering key come out in the order they
	// were enqueued, and a message is handed out only with every earlier
	// unsent message of its key in the same result: while a message is
	// held, or was given back, the later ones of its key stay behind it.
	// Each returned Pending has the same Token.
	Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error)

	// Settle ends a Take. It deletes sent, the messages Pub/Sub
	// acknowledged (even when their lease lapsed meanwhile: they were
	// published), but only as they were taken: a message written anew
	// under the same child key since the Take (its parent forgotten and
	// completed again) stays. It gives back failed, the messages Pub/Sub
	// did not publish, as each outbox.Failure says, those of them that the same
	// Take still holds. Either may be empty. A message left out of both
	// (a publish whose outcome is unknown) stays held until its lease
	// lapses. An error leaves the messages as they were: sent ones are
	// then published again once their lease lapses.
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

	// Revive makes the dead messages of ids (DeadMessage.ID) takeable
	// again at once, their attempts counted from zero. It returns how
	// many it revived; an ID that names no dead message is skipped.
	Revive(ctx context.Context, ids ...string) (int, error)
}

// Waker is implemented by a Source that can signal committed messages,
// so that a relay does not wait out its poll interval.
type Waker interface {
	// Listen calls wake each time messages may have been committed, until
	// ctx ends (it then returns ctx.Err()) or listening fails (it returns
	// the error; the relay polls meanwhile and calls Listen again later).
	// It calls wake once as soon as it listens, since messages committed
	// before then were not signalled. wake does not block. A source that
	// cannot listen after all (a driver without notifications) returns an
	// error matching errors.ErrUnsupported at once: the relay then only
	// polls.
	Listen(ctx context.Context, wake func()) error
}

// Options configures a Relay. The zero value means the defaults.
type Options struct {
	// BatchSize is the most messages one Take hands out. Default 100.
	BatchSize int

	// Lease is how long a relay holds the messages it took. A relay that
	// dies leaves them to the others after it; one that is still
	// publishing when it lapses may see them published a second time by
	// another relay. Each batch's publishes are bounded by it. Default 30s.
	Lease time.Duration

	// PollInterval is how often a relay looks for messages when it is not
	// woken up. Default 1s.
	PollInterval time.Duration

	// Logger receives the relay's log lines. Default slog.Default().
	Logger *slog.Logger

	// MeterProvider receives the relay's metrics: the histogram
	// idemgate.relay.lag (seconds from commit to Pub/Sub's
	// acknowledgement of the publish), the gauge idemgate.relay.backlog
	// (unsent messages) and the counter idemgate.relay.failures (failed
	// publishes and store errors, attribute operation). Default: the
	// global provider.
	MeterProvider metric.MeterProvider
}

// Relay publishes the messages of one Source. Run it once per process;
// several processes may relay one Source at once.
type Relay struct {
	src  Source
	pub  *pubsub.Client
	opts Options
	tel  *telemetry
}

// Defaults of Options.
const (
	DefaultBatchSize    = 100
	DefaultLease        = 30 * time.Second
	DefaultPollInterval = time.Second
)

// settleTimeout bounds each Settle, which runs on a context that ignores
// Run's cancellation so that a stopping relay still marks what it sent.
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	tel, err := newTelemetry(o.MeterProvider)
	if err != nil {
		return nil, err
	}
	return &Relay{src: src, pub: pub, opts: o, tel: tel}, nil
}

// Run relays until ctx ends, then stops its publishers and returns
// ctx.Err(). Store errors and failed publishes are logged, counted and
// retried (after PollInterval); they do not end Run. Run may be called
// again after it returned, but not twice at once.
func (r *Relay) Run(ctx context.Context) error {
	unregister, err := r.tel.observeBacklog(r.src)
	if err != nil {
		return err
	}
	defer unregister()

	pubs := make(map[string]*pubsub.Publisher)
	defer func() {
		for _, p := range pubs {
			p.Stop()
		}
	}()

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
	for {
		n, err := r.round(ctx, pubs)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && n > 0 {
			continue // there may be more
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
		r.opts.Logger.WarnContext(ctx, "relay: listening for new messages failed; polling until it listens again", "error", err)
		t := time.NewTimer(r.opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// round takes one batch, publishes it and settles it. It returns how many
// messages it took, and an error when a step failed (the relay then waits
// PollInterval before the next round).
func (r *Relay) round(ctx context.Context, pubs map[string]*pubsub.Publisher) (int, error) {
	batch, err := r.src.Take(ctx, r.opts.BatchSize, r.opts.Lease)
	if err != nil {
		if ctx.Err() == nil {
			r.tel.failed(ctx, opTake)
			r.opts.Logger.ErrorContext(ctx, "relay: taking messages failed", "error", err)
		}
		return 0, err
	}
	if len(batch) == 0 {
		return 0, nil
	}
	start := time.Now()
	sent, unsent := r.publish(ctx, pubs, batch, start)
	if len(unsent) > 0 {
		// Publishing again at once would most likely fail again.
		err = errPublish
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if serr := r.src.Settle(sctx, sent, unsent); serr != nil {
		r.tel.failed(ctx, opSettle)
		r.opts.Logger.ErrorContext(ctx, "relay: marking messages sent failed; they will be published again once their lease lapses",
			"sent", len(sent), "unsent", len(unsent), "error", serr)
		return len(batch), serr
	}
	return len(batch), err
}

// errPublish says that a round could not publish some of its messages.
var errPublish = errors.New("relay: some publishes failed")

// publish publishes batch, in order, and sorts it into the messages
// Pub/Sub acknowledged and those it did not. The publishes are bounded by
// half the lease, so that the batch is settled before another relay may
// take it. A failed publish pauses its ordering key in the client, which
// fails the later messages of that key; they are given back with it, and
// the key is resumed for the next batch.
func (r *Relay) publish(ctx context.Context, pubs map[string]*pubsub.Publisher, batch []outbox.Pending, start time.Time) (sent []outbox.Pending, unsent []outbox.Failure) {
	pctx, cancel := context.WithTimeout(ctx, r.opts.Lease/2)
	defer cancel()
	results := make([]*pubsub.PublishResult, len(batch))
	for i, p := range batch {
		pub, ok := pubs[p.Topic]
		if !ok {
			pub = r.pub.Publisher(p.Topic)
			pub.EnableMessageOrdering = true
			pubs[p.Topic] = pub
		}
		results[i] = pub.Publish(pctx, &pubsub.Message{Data: p.Data, Attributes: p.Attributes, OrderingKey: p.OrderingKey})
	}
	type key struct{ topic, orderingKey string }
	paused := make(map[key]bool)
	for i, res := range results {
		p := batch[i]
		_, err := res.Get(pctx)
		if err == nil {
			sent = append(sent, p)
			r.tel.lag(ctx, p.Waited+time.Since(start))
			continue
		}
		unsent = append(unsent, outbox.Failure{Pending: p, Reason: err.Error()})
		if p.OrderingKey != "" {
			paused[key{p.Topic, p.OrderingKey}] = true
		}
		if ctx.Err() == nil {
			r.tel.failed(ctx, opPublish)
			r.opts.Logger.WarnContext(ctx, "relay: publish failed; the message will be published again",
				"topic", p.Topic, "child_key", p.ChildKey, "error", err)
		}
	}
	for k := range paused {
		pubs[k.topic].ResumePublish(k.orderingKey)
	}
	return sent, unsent
}
