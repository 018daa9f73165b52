package sqlstore

import (
	"context"
	"fmt"
)

// A schema lookup answers, in one row of one statement, what of the store's
// schema is in place. Claim's upsert needs key_hash to be the primary key or
// the only column of a unique index or constraint that is valid, not
// deferrable, not partial and not on an expression or a prefix: without one,
// PostgreSQL and SQLite fail every Claim, and MySQL and MariaDB let every
// Claim of a key win.

// schemaState is what a lookup found.
type schemaState struct {
	table     bool // the table exists
	added     int  // which of addedColumns it has: bit i for addedColumns[i]
	index     indexState
	uniqueKey bool // key_hash is unique as Claim needs
}

// indexState is the state of the index on expires_at.
type indexState int

const (
	indexMissing indexState = iota
	indexValid
	// indexInvalid is a PostgreSQL index left INVALID by a CREATE INDEX
	// CONCURRENTLY that failed.
	indexInvalid
	// indexBuilding is a PostgreSQL index not yet valid while another
	// session holds the lock that CREATE INDEX CONCURRENTLY keeps for its
	// whole build: probably another instance building it. Dropping it
	// would undo that build once it ends, so CreateTable waits instead.
	indexBuilding
)

// complete reports whether the schema needs nothing.
func (st schemaState) complete() bool {
	return st.table && st.added == allAdded && st.index == indexValid && st.uniqueKey
}

// lookSchema runs the schema lookup. A table whose key_hash is not unique
// is an error: it is not the store's table, and no DDL of the store mends
// it.
func (s *Store) lookSchema(ctx context.Context) (schemaState, error) {
	var table, added, index, key int
	if err := s.db.QueryRowContext(ctx, s.schemaLookup()).Scan(&table, &added, &index, &key); err != nil {
		return schemaState{}, fmt.Errorf("sqlstore: look up table %s: %w", s.table, err)
	}
	st := schemaState{table: table > 0, added: added, index: indexState(index), uniqueKey: key > 0}
	if st.table && !st.uniqueKey {
		return st, fmt.Errorf("sqlstore: table %s: key_hash is neither its primary key nor the only column of a unique index or constraint "+
			"(a full, non-deferrable one): every Claim of a key would %s; make key_hash the primary key, or add a unique index on key_hash alone",
			s.table, s.keyless())
	}
	return st, nil
}

// keyless says what Claims do on a table whose key_hash is not unique.
func (s *Store) keyless() string {
	if s.spec.mysql {
		return "win (duplicates run side by side)"
	}
	return "fail (ON CONFLICT needs a unique index)"
}

// schemaLookup renders the lookup for the store's dialect and table. The
// names are validated identifiers (letters, digits, '_'), safe to write
// into the text.
func (s *Store) schemaLookup() string {
	t := s.table
	switch {
	case s.spec.mysql:
		where := t.mysqlWhere()
		return `SELECT
	(SELECT COUNT(*) FROM information_schema.tables WHERE ` + where + `),
	` + addedColumnsLookup(`information_schema.columns WHERE `+where, "column_name") + `,
	(SELECT COUNT(*) FROM information_schema.statistics WHERE ` + where + ` AND index_name = '` + t.index() + `' AND seq_in_index = 1),
	(SELECT COUNT(*) FROM (
		SELECT index_name FROM information_schema.statistics WHERE ` + where + ` AND non_unique = 0
		GROUP BY index_name
		HAVING COUNT(*) = 1 AND MAX(column_name) = 'key_hash' AND MAX(sub_part) IS NULL
	) AS u)`
	case s.spec.prepare: // SQLite; its names are case-insensitive, and so is this lookup
		schema := t.schema
		if schema == "" {
			schema = "main"
		}
		return `SELECT
	(SELECT count(*) FROM ` + t.qualify(doubleQuote, "sqlite_master") + ` WHERE type = 'table' AND name = '` + t.name + `' COLLATE NOCASE),
	` + addedColumnsLookup(`pragma_table_info('`+t.name+`', '`+schema+`')`, "lower(name)") + `,
	(SELECT count(*) FROM ` + t.qualify(doubleQuote, "sqlite_master") + ` WHERE type = 'index' AND name = '` + t.index() + `' COLLATE NOCASE),
	(SELECT count(*) FROM pragma_index_list('` + t.name + `', '` + schema + `') AS l
		WHERE l."unique" = 1 AND l.partial = 0
		AND (SELECT count(*) FROM pragma_index_info(l.name, '` + schema + `')) = 1
		AND (SELECT count(*) FROM pragma_index_info(l.name, '` + schema + `') AS i WHERE i.name = 'key_hash' COLLATE NOCASE) = 1)`
	}
	schema := t.schemaOr("current_schema()")
	return `WITH t AS (
	SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = ` + schema + ` AND c.relname = '` + t.name + `' AND c.relkind IN ('r', 'p')
)
SELECT
	(SELECT count(*) FROM t),
	` + addedColumnsLookup(`t JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND NOT a.attisdropped`, "a.attname") + `,
	COALESCE((SELECT CASE WHEN i.indisvalid THEN 1 WHEN EXISTS (
			SELECT FROM pg_catalog.pg_locks l
			WHERE l.locktype = 'relation' AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
			AND l.relation = t.oid AND l.mode = 'ShareUpdateExclusiveLock' AND l.granted AND l.pid <> pg_backend_pid()
		) THEN 3 ELSE 2 END
		FROM t JOIN pg_catalog.pg_index i ON i.indrelid = t.oid JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
		WHERE c.relname = '` + t.index() + `'), 0),
	(SELECT count(*) FROM t JOIN pg_catalog.pg_index i ON i.indrelid = t.oid
		JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0] AND a.attname = 'key_hash'
		WHERE i.indisunique AND i.indimmediate AND i.indisvalid AND i.indnatts = 1
		AND i.indpred IS NULL AND i.indexprs IS NULL)`
}
