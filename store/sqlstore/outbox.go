package sqlstore

import (
	"context"
	"errors"
	"time"

	"github.com/idemgate/idemgate/outbox"
)

// Outbox is the outbox of a Store with Options.Outbox: the source a relay
// (package relay) publishes from. It implements relay.Source and
// relay.Waker. It is safe for concurrent use, also by relays in other
// processes on the same database.
//
// A Take leases its messages in one short transaction: on PostgreSQL,
// MySQL 8 and MariaDB 10.6 it selects them FOR UPDATE SKIP LOCKED, so
// relays taking at once pass over each other's rows instead of waiting;
// on SQLite, whose writers take turns, the lease columns alone decide.
// Nothing is held open while the relay publishes.
type Outbox struct {
	s *Store
}

// Outbox returns the store's outbox. Its methods fail when the store was
// built without Options.Outbox.
func (s *Store) Outbox() *Outbox { return &Outbox{s: s} }

// errNotDone marks what is not built yet (work in progress on branch
// h5-outbox).
var errNotDone = errors.New("sqlstore: outbox: not implemented yet")

// Take implements relay.Source.
//
// NOT DONE YET.
func (o *Outbox) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	return nil, errNotDone
}

// Settle implements relay.Source: it deletes sent and gives back unsent
// in one transaction.
//
// NOT DONE YET.
func (o *Outbox) Settle(ctx context.Context, sent, unsent []outbox.Pending) error {
	return errNotDone
}

// Backlog implements relay.Source: it counts the outbox's rows.
//
// NOT DONE YET.
func (o *Outbox) Backlog(ctx context.Context) (int64, error) {
	return 0, errNotDone
}

// Listen implements relay.Waker. On PostgreSQL through pgx's database/sql
// driver (github.com/jackc/pgx/v5/stdlib) it LISTENs on a dedicated
// connection to the channel that CompleteTx notifies (pg_notify, sent on
// commit); elsewhere it returns errors.ErrUnsupported, and the relay
// polls.
//
// NOT DONE YET.
func (o *Outbox) Listen(ctx context.Context, wake func()) error {
	return errors.ErrUnsupported
}

// enqueue writes msgs, the messages of c (key parent), in tx.
//
// NOT DONE YET.
func (s *Store) enqueue(ctx context.Context, exec func(ctx context.Context, q string, args ...any) error, parent string, msgs []outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	return errNotDone
}
