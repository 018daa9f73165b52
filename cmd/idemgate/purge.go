package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

const purgeHelp = `Purge deletes expired records in batches, where the store needs it: a SQL
store keeps a row until something deletes it (sqlstore's PurgeExpired). A
record is deleted only once every operation treats it as absent, so purge
may run next to live traffic, for example from a scheduled job. Redis,
Datastore and Firestore delete expired records by themselves; for them purge
says so and exits 0.
`

// purger is a store that deletes its expired records on request (sqlstore).
type purger interface {
	PurgeExpired(ctx context.Context, limit int) (int64, error)
}

// selfExpiry says how a store that needs no purge, named by its URL
// scheme, gets rid of its expired records.
func selfExpiry(scheme string) string {
	switch {
	case strings.HasPrefix(scheme, "redis"):
		return "Redis deletes each record by itself once it has expired (PEXPIREAT, after the store's grace)"
	case scheme == "datastore":
		return "Datastore deletes expired records by itself through a TTL policy on the expiresAt property (set one up: docs/stores/datastore.md)"
	case scheme == "firestore":
		return "Firestore deletes expired records by itself through a TTL policy on the expiresAt field (set one up: docs/stores/firestore.md)"
	}
	return "the " + scheme + " store deletes expired records by itself"
}

func (c *cli) purge(ctx context.Context, args []string) int {
	fs, cm := c.flags("purge", "", purgeHelp, 10*time.Minute)
	batch := fs.Int("batch", 1000, "records deleted per statement, each its own short transaction")
	rest, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	if len(rest) > 0 || *batch <= 0 {
		fmt.Fprintln(c.stderr, "idemgate: purge takes no arguments, and -batch must be positive")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, cm.timeout)
	defer cancel()
	o, err := c.open(ctx, cm)
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	defer o.Close()
	p, ok := o.Store.(purger)
	if !ok {
		fmt.Fprintf(c.stdout, "nothing to purge in %s: %s\n", o.Where(), selfExpiry(o.Name))
		return exitOK
	}
	if err := tableReady(ctx, o); err != nil {
		return c.fail(ctx, cm, err)
	}
	n, err := p.PurgeExpired(ctx, *batch)
	if err != nil {
		return c.fail(ctx, cm, fmt.Errorf("purged %d expired records from %s, then: %w", n, o.Where(), err))
	}
	fmt.Fprintf(c.stdout, "purged %d expired records from %s\n", n, o.Where())
	return exitOK
}
