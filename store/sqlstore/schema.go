package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// CreateTable creates the store's table and its index on expires_at unless
// both exist. It only looks when they do, so an application whose database
// user may not run DDL can still call it at start-up once the schema is in
// place. Instances that start together may all call it: a creation that
// races another one is checked again rather than reported.
func (s *Store) CreateTable(ctx context.Context) error {
	var err error
	for range 3 {
		var n int
		if err = s.db.QueryRowContext(ctx, s.q.exists).Scan(&n); err != nil {
			break
		}
		if n == s.q.objects {
			return nil
		}
		if err = s.createOnce(ctx); err == nil {
			return nil
		}
	}
	return fmt.Errorf("sqlstore: create table %s: %w", s.table, err)
}

func (s *Store) createOnce(ctx context.Context) error {
	for _, ddl := range s.q.create {
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
