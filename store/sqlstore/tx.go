package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
)

// DB returns the database the store keeps its records in: begin the
// transactions given to [Store.CompleteTx] on it.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect returns the dialect the store speaks, for code that writes its
// own statements next to the store's (placeholders, DDL).
func (s *Store) Dialect() Dialect { return s.dialect }

// CompleteTx records c done inside tx, a transaction of the caller's, so
// that the record turns DONE exactly when tx commits: the business writes
// of the same transaction and the completion are kept or lost together.
//
// It first calls [store.EnterTx] with c, then runs one statement, a
// fence-checked UPDATE like that of [Store.Complete], on tx's connection.
// It succeeds when c's record is CLAIMED with c's fence and token, whether
// or not the lease has lapsed (until another Claim takes the key over, c is
// the only holder), and leaves the state and expiry Complete leaves. It returns an
// error matching [store.ErrFenced], having written nothing, when c no
// longer owns its record (the key was taken over, released, failed or forgotten,
// or the record expired or is absent) and when the record is DONE already,
// also under c's fence: the work has committed once, by an earlier
// transaction whose commit reply was lost, say, and this transaction must
// not commit its effects a second time. Roll tx back either way. A claim
// that is not won (its Status is not Won) is refused with
// [store.ErrNotWon] before anything is sent.
//
// When the UPDATE matches nothing, CompleteTx reads the record once more
// to learn why: on PostgreSQL, MySQL and MariaDB on the store's own
// database ([Store.DB]), outside tx, so that it sees the latest committed
// record rather than tx's snapshot; on SQLite inside tx, which then holds
// the write lock and so sees the latest record. If the record is in fact
// still CLAIMED under c's fence, tx could not see c's claim: it is a
// PostgreSQL transaction at REPEATABLE READ or SERIALIZABLE whose snapshot
// was taken before the claim committed, or it completed c once already. c
// still owns its record, so the error does not match ErrFenced: roll back
// and run the transaction again, begun after the claim (or at READ
// COMMITTED). Any other error comes from the database; a deadlock or a
// serialization failure aborts the whole transaction, so it is not retried
// here but returned for the caller to roll back (and retry the
// transaction, or let the delivery be retried).
//
// The store's table must be in the database tx runs on, next to the
// business tables: a transaction on another database fails with the
// database's error for a missing table (not ErrFenced) and completes
// nothing. tx may come from any *sql.DB on that database, the store's or
// the application's own: the statement is sent as text on tx's connection.
//
// Call CompleteTx first in the transaction, before the business writes. It
// locks the record's row until tx ends, so a holder that lost its key
// learns so before it writes anything, and a Claim that races the
// transaction waits for it, then sees DONE (commit) or the claim as it was
// (rollback). Called last, it still decides correctly, but a fenced holder
// has done its writes in vain. Under READ COMMITTED (the default of
// PostgreSQL) and in InnoDB, the UPDATE reads the row's latest committed
// version after waiting for its lock, so it sees a takeover that committed
// while it waited. Under PostgreSQL's REPEATABLE READ or SERIALIZABLE, a
// change to the record (a takeover, a renewal) that committed after the
// transaction's snapshot makes it fail with a serialization error instead
// (not ErrFenced): roll back all the same.
//
// On SQLite with the one connection the package documentation advises, tx
// holds that connection: do not call the store's other methods before tx
// ends, they would wait for it. That includes the gateway's renewal of the
// lease, which CompleteTx ends (store.EnterTx): called first, it lets tx
// run longer than the lease; a transaction that holds the connection
// without having called it delays each renewal, and loses the claim if it
// lasts past the renewal's deadline (see [Store.Extend]).
//
// After tx commits, the gateway's own Complete of c answers true (same
// fence on a DONE record): the body of the gateway's Lock may call
// CompleteTx with the claim from gateway.ClaimFromContext, and Lock then
// returns nil without logging anything.
//
// msgs, if any, are enqueued in the store's outbox in tx, once the record
// is known to be c's: they commit if and only if tx commits the record
// DONE, and a relay (package relay) publishes them then. Each gets its
// child key from c's key and its name (see [outbox.Message]); a message
// Pub/Sub would refuse fails CompleteTx before anything is sent. The
// store needs Options.Outbox and its outbox table (see [Store.CreateTable]).
func (s *Store) CompleteTx(ctx context.Context, tx *sql.Tx, c store.Claim, msgs ...outbox.Message) error {
	if tx == nil {
		return errors.New("sqlstore: complete in tx: nil *sql.Tx")
	}
	if err := store.CheckWon(c); err != nil {
		return fmt.Errorf("sqlstore: complete in tx: %w", err)
	}
	pending, err := s.prepareMsgs(c.Key, msgs)
	if err != nil {
		return fmt.Errorf("sqlstore: complete in tx: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlstore: complete in tx: %w", err)
	}
	store.EnterTx(c)
	hash := keyHash(c.Key)
	q := s.q.completeTx
	// As text, not the store's prepared statement: tx may belong to
	// another *sql.DB, which cannot run a statement prepared on the
	// store's (database/sql refuses it), and a *sql.Tx does not say
	// which *sql.DB it came from.
	res, err := tx.ExecContext(ctx, q.text, q.args(hash, c.Fence, c.Token)...)
	if err != nil {
		return fmt.Errorf("sqlstore: complete in tx: %w", err)
	}
	done, err := s.completed(res)
	if err != nil {
		return fmt.Errorf("sqlstore: complete in tx: %w", err)
	}
	if done {
		return s.enqueueTx(ctx, tx, pending)
	}
	return s.notCompleted(ctx, c, hash, func(dest ...any) error {
		r := s.q.recordState
		return tx.QueryRowContext(ctx, r.text, r.args(hash)...).Scan(dest...)
	})
}

// CompletePgxTx is [Store.CompleteTx] for a transaction of pgx's own API
// (pgx.Tx, from a *pgx.Conn or a *pgxpool.Pool), for PostgreSQL stores
// only: on another dialect it returns an error and runs nothing. Everything
// CompleteTx says holds: the pool must reach the database of the store's
// table. A store can be built on the same pool with
// stdlib.OpenDBFromPool(pool) (package github.com/jackc/pgx/v5/stdlib).
// msgs are enqueued as CompleteTx enqueues them.
func (s *Store) CompletePgxTx(ctx context.Context, tx pgx.Tx, c store.Claim, msgs ...outbox.Message) error {
	if s.dialect != PostgreSQL {
		return fmt.Errorf("sqlstore: complete in pgx tx: a pgx.Tx is PostgreSQL's and this store speaks %v; use CompleteTx", s.dialect)
	}
	if tx == nil {
		return errors.New("sqlstore: complete in pgx tx: nil pgx.Tx")
	}
	if err := store.CheckWon(c); err != nil {
		return fmt.Errorf("sqlstore: complete in pgx tx: %w", err)
	}
	pending, err := s.prepareMsgs(c.Key, msgs)
	if err != nil {
		return fmt.Errorf("sqlstore: complete in pgx tx: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlstore: complete in pgx tx: %w", err)
	}
	store.EnterTx(c)
	hash := keyHash(c.Key)
	tag, err := tx.Exec(ctx, s.q.completeTx.text, hash, c.Fence, c.Token)
	if err != nil {
		return fmt.Errorf("sqlstore: complete in pgx tx: %w", err)
	}
	if tag.RowsAffected() > 0 {
		return s.enqueuePgxTx(ctx, tx, pending)
	}
	return s.notCompleted(ctx, c, hash, nil)
}

// notCompleted is the error of a CompleteTx whose UPDATE matched nothing.
// It reads c's record to tell why: on the store's own database, outside
// the caller's transaction and its snapshot, or, on SQLite, with inTx (the
// transaction, which holds the write lock and so sees the latest record).
// The key is left out of the errors: it may carry personal data.
//
// Reading outside the transaction is sound because the UPDATE saw the
// record at some moment not CLAIMED under c's fence (a takeover, a release
// or an expiry), or did not see the latest record at all (an older
// snapshot): a record that leaves "CLAIMED under fence f" never returns to
// it, since fences only rise. So a later read that finds it CLAIMED under
// c's fence and token proves the UPDATE did not see the latest record.
func (s *Store) notCompleted(ctx context.Context, c store.Claim, hash []byte, inTx func(dest ...any) error) error {
	var state, fence, live int64
	var token []byte // MySQL keeps it as a BLOB
	var err error
	if s.dialect == SQLite {
		err = inTx(&state, &fence, &token, &live)
	} else {
		r := s.q.recordState
		err = s.db.QueryRowContext(ctx, r.text, r.args(hash)...).Scan(&state, &fence, &token, &live)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows): // absent
	case err != nil:
		return fmt.Errorf("sqlstore: complete in tx: fence %d matched no CLAIMED record, and reading the record failed: %w", c.Fence, err)
	case live == 1 && fence == c.Fence && state == 2:
		return fmt.Errorf("sqlstore: complete in tx: the record is DONE already under fence %d: this transaction must not commit its effects a second time: %w", c.Fence, store.ErrFenced)
	case live == 1 && fence == c.Fence && state == 3:
		return fmt.Errorf("sqlstore: complete in tx: the record is FAILED under fence %d: the claim's work was recorded as failed (store.Failer), so it cannot complete: %w", c.Fence, store.ErrFenced)
	case live == 1 && fence == c.Fence && state == 1 && string(token) == c.Token:
		return fmt.Errorf("sqlstore: complete in tx: the record is still CLAIMED under fence %d, but this transaction did not see it: its snapshot predates the claim (REPEATABLE READ or SERIALIZABLE), or it completed the claim already; roll back and run it again, begun after the claim", c.Fence)
	}
	return fmt.Errorf("sqlstore: complete in tx: fence %d no longer owns its record: %w", c.Fence, store.ErrFenced)
}

// completed reads the answer of the complete statements: whether one
// marked (or, Complete's, found) the record DONE under the caller's fence.
func (s *Store) completed(res sql.Result) (bool, error) {
	if s.spec.mysql {
		// See mysqlComplete: the fence comes back through LAST_INSERT_ID
		// when a row matched, 0 otherwise.
		id, err := res.LastInsertId()
		return id != 0, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
