package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// exec runs q with a (in the order of q's numbered placeholders).
func (s *Store) exec(ctx context.Context, q query, a ...any) (sql.Result, error) {
	if s.prepared == nil {
		return s.db.ExecContext(ctx, q.text, q.args(a...)...)
	}
	st, err := s.prepared.get(ctx, s.db, q.text)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, q.args(a...)...)
}

// queryRow runs q, which returns at most one row, and scans that row into
// dest. It returns sql.ErrNoRows when there is none.
func (s *Store) queryRow(ctx context.Context, q query, dest []any, a ...any) error {
	if s.prepared == nil {
		return s.db.QueryRowContext(ctx, q.text, q.args(a...)...).Scan(dest...)
	}
	st, err := s.prepared.get(ctx, s.db, q.text)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, q.args(a...)...).Scan(dest...)
}

// stmtCache holds the statements a store prepared, for SQLite, which would
// otherwise compile every statement on every call (the claim upsert costs
// more to compile than to run). They live as long as the *sql.DB.
type stmtCache struct {
	mu    sync.Mutex // guards stmts
	stmts map[string]*sql.Stmt
}

// get returns text prepared, preparing it on first use.
func (c *stmtCache) get(ctx context.Context, db *sql.DB, text string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[text]; ok {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	if c.stmts == nil {
		c.stmts = make(map[string]*sql.Stmt)
	}
	c.stmts[text] = st
	return st, nil
}
