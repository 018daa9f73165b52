package relay

import (
	"context"
	"errors"
	"log/slog"
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

	// Settle ends a Take: it deletes sent, the messages Pub/Sub
	// acknowledged (even when their lease lapsed meanwhile: they were
	// published), and gives back unsent, those it did not, to be taken
	// again at once, unless another Take holds them now. Either may be
	// empty. An error leaves the messages as they were: sent ones are
	// then published again once their lease lapses.
	Settle(ctx context.Context, sent, unsent []outbox.Pending) error

	// Backlog returns how many messages are committed and unsent, held
	// or not.
	Backlog(ctx context.Context) (int64, error)
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
}

// New returns a Relay that takes messages from src and publishes them
// with pub. A nil opts means the defaults. It does no I/O.
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
	_ = outbox.ChildKeyAttribute
	// TODO(h5): defaults and validation; not done yet.
	return &Relay{src: src, pub: pub, opts: o}, nil
}

// Run relays until ctx ends, then stops its publishers and returns
// ctx.Err(). Store errors and failed publishes are logged, counted and
// retried; Run returns earlier only on an error it cannot recover from.
//
// NOT DONE YET: the body below is a placeholder.
func (r *Relay) Run(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}
