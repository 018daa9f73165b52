package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// CreateTable makes the store's schema complete: it creates the table and
// its index on expires_at, adds the fingerprint column to a table created
// by an earlier version without it, and builds the index on a table that
// lacks it. It first looks, in one statement, and runs DDL only for what is
// missing, so an application whose database user may not run DDL can still
// call it at start-up once the schema is in place. Instances that start
// together may all call it: DDL that races another instance's is followed
// by another look rather than reported.
//
// It refuses a table whose key_hash is not unique as every Claim needs it
// (the primary key, or the only column of a full unique index or
// constraint), since no DDL of the store mends it: the error names the
// table and what it lacks.
func (s *Store) CreateTable(ctx context.Context) error {
	var err error
	for range 3 {
		st, lerr := s.lookSchema(ctx)
		if lerr != nil {
			return lerr
		}
		if st.complete() {
			return nil
		}
		if err = s.upgrade(ctx, st); err == nil {
			return nil
		}
	}
	return fmt.Errorf("sqlstore: create table %s: %w", s.table, err)
}

// upgrade runs the DDL for what st lacks.
func (s *Store) upgrade(ctx context.Context, st schemaState) error {
	var ddls []string
	if !st.table {
		ddls = s.q.create
	} else {
		if !st.fingerprint {
			ddls = append(ddls, s.q.addColumn)
		}
		if st.index != indexValid {
			ddls = append(ddls, s.addIndex())
		}
	}
	for _, ddl := range ddls {
		if _, err := s.db.ExecContext(ctx, ddl); err != nil {
			return err
		}
	}
	return nil
}

// addIndex builds the index on expires_at on a table that exists.
func (s *Store) addIndex() string {
	if s.spec.mysql {
		return `ALTER TABLE ` + s.table.ref(backquote) + ` ADD INDEX ` + backquote(s.table.index()) + ` (expires_at)`
	}
	return s.q.create[len(s.q.create)-1]
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
