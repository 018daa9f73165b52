package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/internal/example"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store/datastorestore"
	"github.com/idemgate/idemgate/store/firestorestore"
	"github.com/idemgate/idemgate/store/sqlstore"
	"github.com/idemgate/idemgate/storeurl"
)

const relayHelp = `Relay publishes the messages that guarded bodies enqueued in a store's outbox
(CompleteTx with messages; the SQL, Datastore and Firestore stores have one)
to Pub/Sub, each with its child key, and deletes them once Pub/Sub
acknowledged them. It runs until interrupted (SIGINT, SIGTERM). Several
relays may run on one outbox at once. Topic IDs resolve in -project;
PUBSUB_EMULATOR_HOST points the client at an emulator.

At start-up it waits for the outbox: while the store cannot be reached or
its outbox cannot be read (a service creates its SQL tables when it
starts), it logs why and tries again 1s later, then twice as long each
time (30s at most), for -timeout at most; then it exits 1. Once started,
it retries every failure itself, as package relay does: a failure that
repeats (a missing topic) is logged once per backoff step, with a count.
On interrupt it returns within -stop-timeout plus one settle (10s at most).
Its log lines go to stderr as JSON, with Cloud Logging's "severity" field,
as the example service's do.

A message Pub/Sub refused -max-attempts times is given up ("dead"): it
stays in the outbox and, unless -release-dead, the later messages of its
ordering key wait behind it. With -dead, relay lists the dead messages of
a store that keeps them (oldest first; the ordering key only with
-ordering-keys, since it may name a customer) and exits; with -revive
ID,… it makes them takeable again at once, attempts counted from zero,
and exits. Neither needs -project; -timeout bounds them whole.
`

// Relay's start-up waits for the outbox, startWait after its first try,
// then twice as long each time, at most maxStartWait.
const (
	startWait    = time.Second
	maxStartWait = 30 * time.Second
)

// outboxOf returns the outbox of a store that has one: the SQL stores',
// Datastore's and Firestore's.
func outboxOf(st any) (relay.Source, bool) {
	switch st := st.(type) {
	case *sqlstore.Store:
		return st.Outbox(), true
	case *datastorestore.Store:
		return st.Outbox(), true
	case *firestorestore.Store:
		return st.Outbox(), true
	}
	return nil, false
}

func (c *cli) relay(ctx context.Context, args []string) int {
	fs, cm := c.flags("relay", "", relayHelp, time.Minute)
	fs.Lookup("timeout").Usage = "bound on the start-up, the wait for the outbox included (with -dead or -revive: on the whole command)"
	project := fs.String("project", os.Getenv("GOOGLE_CLOUD_PROJECT"), "Google Cloud `project` of the topics given as IDs (default $GOOGLE_CLOUD_PROJECT)")
	var o relay.Options
	fs.IntVar(&o.BatchSize, "batch", relay.DefaultBatchSize, "messages taken per round")
	fs.DurationVar(&o.Lease, "lease", relay.DefaultLease, "how long a relay holds the messages it took; a dead relay's are published again after it")
	fs.DurationVar(&o.PollInterval, "poll", relay.DefaultPollInterval, "how often to look for messages when not woken (PostgreSQL wakes the relay on commit)")
	fs.IntVar(&o.MaxAttempts, "max-attempts", relay.DefaultMaxAttempts, "refused publishes after which a message is given up (negative: never)")
	fs.DurationVar(&o.MinBackoff, "min-backoff", relay.DefaultMinBackoff, "wait after a message's first refused publish, doubled after each; also the first step between the log lines of a repeated failure")
	fs.DurationVar(&o.MaxBackoff, "max-backoff", relay.DefaultMaxBackoff, "longest wait between a message's publishes, and between the log lines of a repeated failure")
	fs.BoolVar(&o.ReleaseDead, "release-dead", false, "let the later messages of a dead message's ordering key pass it")
	fs.DurationVar(&o.StopTimeout, "stop-timeout", relay.DefaultStopTimeout, "on interrupt, how long to wait for Pub/Sub's answers in flight")
	dead := fs.Bool("dead", false, "list the dead messages and exit")
	revive := fs.String("revive", "", "revive the dead messages of these `IDs` (comma-separated) and exit")
	limit := fs.Int("n", 100, "with -dead, the most messages listed")
	asJSON := fs.Bool("json", false, "with -dead, print one JSON object per message, one per line")
	orderingKeys := fs.Bool("ordering-keys", false, "with -dead, show the ordering keys")
	rest, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	if *dead || *revive != "" {
		return c.deadLetters(ctx, cm, rest, *dead, *revive, deadListing{n: *limit, json: *asJSON, orderingKeys: *orderingKeys})
	}
	if len(rest) > 0 || *project == "" {
		fmt.Fprintln(c.stderr, "idemgate: relay takes no arguments, and needs -project (or $GOOGLE_CLOUD_PROJECT)")
		return exitUsage
	}
	log := example.NewLogger(c.stderr, slog.LevelInfo)
	o.Logger = log
	// failed logs err, which ended the relay, as its last line.
	failed := func(ctx context.Context, err error) int {
		log.Error("relay: failed", "error", oneLine(c.explain(ctx, cm, err)))
		if errors.Is(err, errUsage) {
			return exitUsage
		}
		return exitProblem
	}
	octx, cancel := context.WithTimeout(ctx, cm.timeout)
	defer cancel()
	st, src, err := c.awaitOutbox(octx, cm, log)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("relay: stopped")
			return exitOK
		}
		return failed(octx, err)
	}
	defer st.Close()
	client, err := pubsub.NewClient(ctx, *project)
	if err != nil {
		return failed(ctx, fmt.Errorf("pubsub client: %w", err))
	}
	defer client.Close()
	r, err := relay.New(src, client, &o)
	if err != nil {
		return failed(ctx, fmt.Errorf("%w: %w", errUsage, err))
	}
	log.Info("relay: started", "outbox", st.Where(), "project", *project)
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return failed(ctx, err)
	}
	log.Info("relay: stopped")
	return exitOK
}

// awaitOutbox opens cm's store and its outbox, trying again while the
// store cannot be reached or the outbox read (the service has not created
// its tables yet), each time after logging why and when it tries again
// (its durations are text: "2s"), until ctx ends. It gives up at once on
// the caller's mistakes: a bad URL, a store without outbox.
func (c *cli) awaitOutbox(ctx context.Context, cm *common, log *slog.Logger) (*storeurl.Opened, relay.Source, error) {
	wait := startWait
	for {
		st, err := c.open(ctx, cm)
		if err == nil {
			var src relay.Source
			if src, err = openOutbox(ctx, st); err == nil {
				return st, src, nil
			}
			st.Close()
		}
		if errors.Is(err, errUsage) || ctx.Err() != nil {
			return nil, nil, err
		}
		args := []any{"reason", oneLine(err.Error()), "retry_in", wait.String()}
		if dl, ok := ctx.Deadline(); ok {
			args = append(args, "gives_up_in", time.Until(dl).Round(time.Millisecond).String())
		}
		log.Warn("relay: waiting for the store's outbox; trying again", args...)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, fmt.Errorf("the outbox is not ready: %w", err)
		case <-t.C:
		}
		wait = min(2*wait, maxStartWait)
	}
}

// openOutbox returns the outbox of st, once it could read it.
func openOutbox(ctx context.Context, st *storeurl.Opened) (relay.Source, error) {
	src, ok := outboxOf(st.Store)
	if !ok {
		return nil, fmt.Errorf("%w: the %s store has no outbox to relay (the SQL, Datastore and Firestore stores do)", errUsage, st.Name)
	}
	if _, err := src.Backlog(ctx); err != nil {
		return nil, fmt.Errorf("the outbox of %s cannot be read: %w", st.Where(), err)
	}
	return src, nil
}
