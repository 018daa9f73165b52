package sqlstore

import (
	"context"
	"fmt"
	"strings"
)

// outboxLookup renders the statement that counts, in one row, the
// outbox's table, its index on (order_hash, id) and its columns of
// deadColumns.
func (s *Store) outboxLookup() string {
	t, idx := s.ob.table, s.ob.table.name+"_order"
	cols := "'" + strings.Join(deadColumns, "', '") + "'"
	switch {
	case s.spec.mysql:
		where := t.mysqlWhere()
		return `SELECT
	(SELECT COUNT(*) FROM information_schema.tables WHERE ` + where + `),
	(SELECT COUNT(*) FROM information_schema.statistics WHERE ` + where + ` AND index_name = '` + idx + `' AND seq_in_index = 1),
	(SELECT COUNT(*) FROM information_schema.columns WHERE ` + where + ` AND column_name IN (` + cols + `))`
	case s.spec.prepare: // SQLite
		schema := t.schema
		if schema == "" {
			schema = "main"
		}
		return `SELECT
	(SELECT count(*) FROM ` + t.qualify(doubleQuote, "sqlite_master") + ` WHERE type = 'table' AND name = '` + t.name + `' COLLATE NOCASE),
	(SELECT count(*) FROM ` + t.qualify(doubleQuote, "sqlite_master") + ` WHERE type = 'index' AND name = '` + idx + `' COLLATE NOCASE),
	(SELECT count(*) FROM pragma_table_info('` + t.name + `', '` + schema + `') WHERE lower(name) IN (` + cols + `))`
	}
	schema := t.schemaOr("current_schema()")
	return `SELECT
	(SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ` + schema + ` AND c.relname = '` + t.name + `' AND c.relkind IN ('r', 'p')),
	(SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
		WHERE n.nspname = ` + schema + ` AND c.relname = '` + idx + `' AND i.indisvalid),
	(SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
		WHERE n.nspname = ` + schema + ` AND c.relname = '` + t.name + `' AND c.relkind IN ('r', 'p')
		AND a.attname IN (` + cols + `) AND NOT a.attisdropped)`
}

// outboxComplete reports whether the outbox's table and index are in
// place; true for a store without Options.Outbox. A table without the
// columns of dead messages, made by a build before them, is an error
// that says how to mend it: CreateTable leaves a table that may hold
// unsent messages to its operator.
func (s *Store) outboxComplete(ctx context.Context) (bool, error) {
	if !s.outbox {
		return true, nil
	}
	var table, index, cols int
	if err := s.db.QueryRowContext(ctx, s.outboxLookup()).Scan(&table, &index, &cols); err != nil {
		return false, fmt.Errorf("sqlstore: look up outbox %s: %w", s.ob.table, err)
	}
	if table > 0 && cols < len(deadColumns) {
		return false, fmt.Errorf("sqlstore: outbox %s predates failure counts and dead messages: it lacks some of the columns %s; "+
			"add them (%s), or drop the table when it holds no unsent message, and call CreateTable",
			s.ob.table, strings.Join(deadColumns, ", "), strings.Join(s.ob.addColumns, "; "))
	}
	return table > 0 && index > 0, nil
}

// createOutbox creates the outbox's table and index when they are
// missing. The outbox is a new table that only the store's own statements
// use, so its DDL waits for no lock that live traffic holds. DDL that
// races another instance's is followed by another look.
func (s *Store) createOutbox(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		ok, err := s.outboxComplete(ctx)
		if err != nil || ok {
			return err
		}
		var ddlErr error
		for _, ddl := range s.ob.create {
			if _, ddlErr = s.db.ExecContext(ctx, ddl); ddlErr != nil {
				break
			}
		}
		if ddlErr != nil && attempt >= 3 {
			return fmt.Errorf("sqlstore: create outbox %s: %w", s.ob.table, ddlErr)
		}
	}
}
