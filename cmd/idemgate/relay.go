package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store/datastorestore"
	"github.com/idemgate/idemgate/store/firestorestore"
	"github.com/idemgate/idemgate/store/sqlstore"
)

const relayHelp = `Relay publishes the messages that guarded bodies enqueued in a SQL store's
outbox (CompleteTx with messages; SQL, Datastore or Firestore) to Pub/Sub, each with its child key, and
deletes them once Pub/Sub acknowledged them. It runs until interrupted
(SIGINT, SIGTERM). Several relays may run on one outbox at once. Topic IDs
resolve in -project; PUBSUB_EMULATOR_HOST points the client at an emulator.
-timeout bounds opening the store only. Log lines go to stderr.
`

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
	fs, cm := c.flags("relay", "", relayHelp, 30*time.Second)
	project := fs.String("project", os.Getenv("GOOGLE_CLOUD_PROJECT"), "Google Cloud `project` of the topics given as IDs (default $GOOGLE_CLOUD_PROJECT)")
	batch := fs.Int("batch", relay.DefaultBatchSize, "messages taken per round")
	lease := fs.Duration("lease", relay.DefaultLease, "how long a relay holds the messages it took; a dead relay's are published again after it")
	poll := fs.Duration("poll", relay.DefaultPollInterval, "how often to look for messages when not woken (PostgreSQL wakes the relay on commit)")
	rest, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	if len(rest) > 0 || *project == "" {
		fmt.Fprintln(c.stderr, "idemgate: relay takes no arguments, and needs -project (or $GOOGLE_CLOUD_PROJECT)")
		return exitUsage
	}
	octx, cancel := context.WithTimeout(ctx, cm.timeout)
	defer cancel()
	o, err := c.open(octx, cm)
	if err != nil {
		return c.fail(octx, cm, err)
	}
	defer o.Close()
	src, ok := outboxOf(o.Store)
	if !ok {
		return c.fail(octx, cm, fmt.Errorf("%w: the %s store has no outbox to relay (the SQL, Datastore and Firestore stores do)", errUsage, o.Name))
	}
	if _, err := src.Backlog(octx); err != nil {
		return c.fail(octx, cm, fmt.Errorf("the outbox of %s cannot be read (a SQL store creates it with Options.Outbox and CreateTable): %w", o.Where(), err))
	}
	client, err := pubsub.NewClient(ctx, *project)
	if err != nil {
		return c.fail(ctx, cm, fmt.Errorf("pubsub client: %w", err))
	}
	defer client.Close()
	log := slog.New(slog.NewTextHandler(c.stderr, nil))
	r, err := relay.New(src, client, &relay.Options{BatchSize: *batch, Lease: *lease, PollInterval: *poll, Logger: log})
	if err != nil {
		fmt.Fprintln(c.stderr, "idemgate:", err)
		return exitUsage
	}
	log.Info("relay: started", "outbox", o.Where(), "project", *project)
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return c.fail(ctx, cm, err)
	}
	log.Info("relay: stopped")
	return exitOK
}
