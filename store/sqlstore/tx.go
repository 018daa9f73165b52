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

// CompleteTx records c done inside tx, a transaction of the caller's on the
// database of the store's table, so that the record turns DONE exactly when
// tx commits, together with the transaction's business writes. Call it first
// in the transaction: it calls [store.EnterTx], which ends the gateway's
// renewal, and locks the record's row until tx ends.
//
// It succeeds when c's record is CLAIMED under c's fence and token, lapsed
// lease or not. It returns an error matching [store.ErrFenced], having
// written nothing, when c no longer owns its record, and when the record is
// DONE already under c's fence (the work committed once; this transaction
// must not commit it again): roll tx back. If the record is still c's but tx
// could not see it (a snapshot older than the claim), the error does not
// match ErrFenced: roll back and run the transaction again. A claim that is
// not won is refused with [store.ErrNotWon] before anything is sent; a
// deadlock or serialization failure is returned, not retried. After tx
// commits, the gateway's own Complete of c answers true.
//
// msgs, if any, are enqueued in the store's outbox in tx (Options.Outbox),
// each with its child key from c's key and its name ([outbox.Message]); a
// message Pub/Sub would refuse fails CompleteTx before anything is sent.
// See docs/stores/sql.md, "Completing inside your transaction" and "The
// outbox", for isolation levels, SQLite's one connection and pgx.
func (s *Store) CompleteTx(ctx context.Context, tx *sql.Tx, c store.Claim, msgs ...outbox.Message) error {
	if tx == nil {
		return errors.New("sqlstore: complete in tx: nil *sql.Tx")
	}
	// As text: tx may belong to another *sql.DB, which cannot run a
	// statement prepared on the store's.
	return s.completeIn(ctx, "complete in tx", c, msgs, func(q string, args ...any) (bool, error) {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return false, err
		}
		return s.completed(res)
	}, func(dest ...any) error {
		r := s.q.recordState
		return tx.QueryRowContext(ctx, r.text, r.args(keyHash(c.Key))...).Scan(dest...)
	})
}

// CompletePgxTx is [Store.CompleteTx] for a pgx.Tx (from a *pgx.Conn or a
// *pgxpool.Pool), on a PostgreSQL store only: on another dialect it returns
// an error and runs nothing. Build the store on the same pool with
// stdlib.OpenDBFromPool(pool).
func (s *Store) CompletePgxTx(ctx context.Context, tx pgx.Tx, c store.Claim, msgs ...outbox.Message) error {
	if s.dialect != PostgreSQL {
		return fmt.Errorf("sqlstore: complete in pgx tx: a pgx.Tx is PostgreSQL's and this store speaks %v; use CompleteTx", s.dialect)
	}
	if tx == nil {
		return errors.New("sqlstore: complete in pgx tx: nil pgx.Tx")
	}
	return s.completeIn(ctx, "complete in pgx tx", c, msgs, func(q string, args ...any) (bool, error) {
		tag, err := tx.Exec(ctx, q, args...)
		return tag.RowsAffected() > 0, err
	}, nil)
}

// completeIn is CompleteTx in a transaction that runs a statement with
// exec, which reports whether it matched a row, and reads c's record with
// inTx (see notCompleted).
func (s *Store) completeIn(ctx context.Context, op string, c store.Claim, msgs []outbox.Message,
	exec func(q string, args ...any) (bool, error), inTx func(dest ...any) error) error {
	pending, err := s.enterTx(ctx, c, msgs)
	if err != nil {
		return fmt.Errorf("sqlstore: %s: %w", op, err)
	}
	hash := keyHash(c.Key)
	q := s.q.completeTx
	done, err := exec(q.text, q.args(hash, c.Fence, c.Token)...)
	if err != nil {
		return fmt.Errorf("sqlstore: %s: %w", op, err)
	}
	if !done {
		return s.notCompleted(ctx, c, hash, inTx)
	}
	return s.enqueue(ctx, op, func(q string, args ...any) error {
		_, err := exec(q, args...)
		return err
	}, pending)
}

// enterTx checks c and msgs, then hands c's renewal to the transaction
// (store.EnterTx), before a CompleteTx sends anything.
func (s *Store) enterTx(ctx context.Context, c store.Claim, msgs []outbox.Message) ([]outbox.Pending, error) {
	if err := store.CheckWon(c); err != nil {
		return nil, err
	}
	pending, err := s.prepareMsgs(c.Key, msgs)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	store.EnterTx(c)
	return pending, nil
}

// notCompleted is the error of a CompleteTx whose UPDATE matched nothing. It
// reads c's record outside tx (on SQLite with inTx, which holds the write
// lock): sound, because a record that leaves "CLAIMED under fence f" never
// returns to it, so finding it so proves tx did not see the latest record.
// The key is left out of the errors: it may carry personal data.
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
