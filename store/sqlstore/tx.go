package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
// It runs one statement, the fence-checked UPDATE of [Store.Complete]: it
// succeeds when c's record is CLAIMED with c's fence (whether or not the
// lease has lapsed: until another Claim takes the key over, c is the only
// holder) or already DONE with c's fence (a retry), and leaves the same
// state and expiry as Complete. When c no longer owns its record (the key
// was taken over, released, completed under another fence, or the record
// expired or is absent) it writes nothing and returns an error matching
// [store.ErrFenced]: roll tx back, because another holder owns the work
// now. Any other error comes from the database; a deadlock or a
// serialization failure aborts the whole transaction, so it is not retried
// here but returned for the caller to roll back (and retry the
// transaction, or let the delivery be retried).
//
// The store's table must be in the database tx runs on, next to the
// business tables: a transaction on another database fails with the
// database's error for a missing table (not ErrFenced) and completes
// nothing.
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
// takeover that committed after the transaction's snapshot makes it fail
// with a serialization error instead (not ErrFenced): roll back all the same.
//
// On SQLite with the one connection the package documentation advises, tx
// holds that connection: do not call the store's other methods before tx
// ends, they would wait for it.
//
// After tx commits, the gateway's own Complete of c answers true (same
// fence on a DONE record): the body of the gateway's Lock may call
// CompleteTx with the claim from gateway.ClaimFromContext, and Lock then
// returns nil without logging anything.
func (s *Store) CompleteTx(ctx context.Context, tx *sql.Tx, c store.Claim) error {
	if tx == nil {
		return errors.New("sqlstore: complete in tx: nil *sql.Tx")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlstore: complete in tx: %w", err)
	}
	res, err := s.txExec(ctx, tx, s.q.complete, keyHash(c.Key), c.Fence)
	if err != nil {
		return fmt.Errorf("sqlstore: complete in tx: %w", err)
	}
	done, err := s.completed(res)
	if err != nil {
		return fmt.Errorf("sqlstore: complete in tx: %w", err)
	}
	if !done {
		return fencedTx(c)
	}
	return nil
}

// CompletePgxTx is [Store.CompleteTx] for a transaction of pgx's own API
// (pgx.Tx, from a *pgx.Conn or a *pgxpool.Pool), for PostgreSQL stores
// only: on another dialect it returns an error and runs nothing. Everything
// CompleteTx says holds: the pool must reach the database of the store's
// table. A store can be built on the same pool with
// stdlib.OpenDBFromPool(pool) (package github.com/jackc/pgx/v5/stdlib).
func (s *Store) CompletePgxTx(ctx context.Context, tx pgx.Tx, c store.Claim) error {
	if s.dialect != PostgreSQL {
		return fmt.Errorf("sqlstore: complete in pgx tx: a pgx.Tx is PostgreSQL's and this store speaks %v; use CompleteTx", s.dialect)
	}
	if tx == nil {
		return errors.New("sqlstore: complete in pgx tx: nil pgx.Tx")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlstore: complete in pgx tx: %w", err)
	}
	tag, err := tx.Exec(ctx, s.q.complete.text, keyHash(c.Key), c.Fence)
	if err != nil {
		return fmt.Errorf("sqlstore: complete in pgx tx: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fencedTx(c)
	}
	return nil
}

// fencedTx is the error of a CompleteTx whose claim no longer owns its
// record. The key is left out: it may carry personal data.
func fencedTx(c store.Claim) error {
	return fmt.Errorf("sqlstore: complete in tx: fence %d no longer owns its record: %w", c.Fence, store.ErrFenced)
}

// completed reads the answer of the complete statement: whether it marked
// (or found) the record DONE under the caller's fence.
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

// txExec runs q inside tx. A statement the store already prepared is
// reused on tx's connection; one it has not is sent as text, because
// preparing it on the pool would need a second connection, which SQLite's
// single one cannot give while tx holds it.
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, q query, a ...any) (sql.Result, error) {
	if st := s.prepared.lookup(q.text); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, q.args(a...)...)
	}
	return tx.ExecContext(ctx, q.text, q.args(a...)...)
}
