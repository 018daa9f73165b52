package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// CreateTable creates the store's table and its index on expires_at unless
// both exist, and adds the fingerprint column to a table created by an
// earlier version without it. It only looks when the schema is complete, so
// an application whose database user may not run DDL can still call it at
// start-up once the schema is in place. Instances that start together may
// all call it: a creation that races another one is checked again rather
// than reported.
func (s *Store) CreateTable(ctx context.Context) error {
	var err error
	for range 3 {
		var n, lacksFingerprint int
		if err = s.db.QueryRowContext(ctx, s.q.exists).Scan(&n, &lacksFingerprint); err != nil {
			break
		}
		if n == s.q.objects {
			return nil
		}
		if err = s.createOnce(ctx, lacksFingerprint == 1); err == nil {
			return nil
		}
	}
	return fmt.Errorf("sqlstore: create table %s: %w", s.table, err)
}

// createOnce runs the idempotent DDL and, if addColumn, the ALTER that adds
// the fingerprint column, which cannot be made idempotent in every dialect.
func (s *Store) createOnce(ctx context.Context, addColumn bool) error {
	ddls := s.q.create
	if addColumn {
		ddls = append(ddls[:len(ddls):len(ddls)], s.q.addColumn)
	}
	for _, ddl := range ddls {
		if _, err := s.db.ExecContext(ctx, ddl); err != nil {
			return err
		}
	}
	return nil
}

// PurgeExpired deletes records whose expiresAt has passed on the database's
// clock, limit rows per statement, until none is left, and returns how many
// it deleted. A record is deleted only once it is absent in the eyes of
// every operation, so a purge may run at any time next to live traffic; on
// PostgreSQL it skips rows that a Claim has locked, and on MySQL it takes no
// gap locks. Each batch is its own transaction: keep limit small enough
// (a few thousand) that a batch holds its locks briefly. On error it returns
// the rows deleted by the batches that committed.
func (s *Store) PurgeExpired(ctx context.Context, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("sqlstore: purge limit %d is not positive", limit)
	}
	var total int64
	for {
		var n int64
		err := s.retry(ctx, func() error {
			var err error
			n, err = s.purgeBatch(ctx, limit)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("sqlstore: purge: %w", err)
		}
		total += n
		if n < int64(limit) {
			return total, nil
		}
	}
}

// purgeBatch deletes at most limit expired records.
func (s *Store) purgeBatch(ctx context.Context, limit int) (int64, error) {
	if !s.spec.mysql {
		res, err := s.exec(ctx, s.q.purge, limit)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() // a no-op after Commit
	res, err := tx.ExecContext(ctx, s.q.purge.text, s.q.purge.args(limit)...)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// schemaHint explains err when it is the database's complaint that the table
// has no fingerprint column: the table was created before the store kept
// fingerprints, and CreateTable, which adds the column, has not run since.
func (s *Store) schemaHint(err error) error {
	if !missingColumn(err) || !strings.Contains(err.Error(), "fingerprint") {
		return err
	}
	return fmt.Errorf("table %s has no fingerprint column (it predates payload fingerprints): call CreateTable, or run %s: %w", s.table, s.q.addColumn, err)
}

// missingColumn reports whether err is an unknown-column error of
// PostgreSQL (SQLSTATE 42703), MySQL (1054) or SQLite (SQLITE_ERROR, "no
// such column" or "has no column named").
func missingColumn(err error) bool {
	if pgState(err) == "42703" {
		return true
	}
	if n, ok := mysqlErrorNumber(err); ok {
		return n == 1054
	}
	var e interface{ Code() int }
	return errors.As(err, &e) && e.Code() == 1 && strings.Contains(err.Error(), "column")
}
