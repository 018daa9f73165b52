package sqlstore

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// identRE is what each part of a table name must match: an unquoted SQL
// identifier in every dialect, short enough that "<name>_expires_at" still
// fits PostgreSQL's 63-byte limit on names.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// table is a validated table name, split into its optional schema and its
// name. Both parts are plain identifiers, and the statements quote them all
// the same, so a name that happens to be a reserved word still works.
type table struct {
	schema string // "" for the connection's default schema
	name   string
}

// parseTable validates s, "table" or "schema.table".
func parseTable(s string) (table, error) {
	t, qualified := table{name: s}, false
	if schema, name, ok := strings.Cut(s, "."); ok {
		t, qualified = table{schema: schema, name: name}, true
	}
	if qualified && !identRE.MatchString(t.schema) || !identRE.MatchString(t.name) {
		return table{}, fmt.Errorf("sqlstore: table name %.80q is not [schema.]table, each part a letter or '_' followed by at most 47 letters, digits or '_'", s)
	}
	return t, nil
}

// String returns the name as given to New.
func (t table) String() string {
	if t.schema == "" {
		return t.name
	}
	return t.schema + "." + t.name
}

// index is the name of the index on expires_at.
func (t table) index() string { return t.name + "_expires_at" }

// schemaOr returns t's schema as a SQL string literal, or current, the
// expression of the session's own schema, when t names none. Names are
// validated identifiers, safe to write into the text.
func (t table) schemaOr(current string) string {
	if t.schema == "" {
		return current
	}
	return "'" + t.schema + "'"
}

// mysqlWhere selects t's rows of an information_schema view.
func (t table) mysqlWhere() string {
	return `table_schema = ` + t.schemaOr("DATABASE()") + ` AND table_name = '` + t.name + `'`
}

// quoter quotes one identifier for a dialect. Validated identifiers contain
// no quote characters, so wrapping is enough.
type quoter func(ident string) string

func doubleQuote(ident string) string { return `"` + ident + `"` }
func backquote(ident string) string   { return "`" + ident + "`" }

// ref is the table's reference in statements: quoted, schema-qualified when
// a schema was given.
func (t table) ref(q quoter) string { return t.qualify(q, t.name) }

// qualify quotes name and prefixes it with the table's schema, if any.
func (t table) qualify(q quoter, name string) string {
	if t.schema == "" {
		return q(name)
	}
	return q(t.schema) + "." + q(name)
}

// column is a column of a table the store creates, with its type on
// PostgreSQL, on the MySQL family and on SQLite.
type column struct{ name, pg, mysql, sqlite string }

// of returns c's type in dialect d.
func (c column) of(d Dialect) string {
	switch d {
	case MySQL, MariaDB:
		return c.mysql
	case SQLite:
		return c.sqlite
	}
	return c.pg
}

// createTable renders the CREATE TABLE IF NOT EXISTS of tbl: cols as d
// declares them, then keys, inside the parentheses; options after them.
func createTable(d Dialect, tbl string, cols []column, options string, keys ...string) string {
	lines := make([]string, 0, len(cols)+len(keys))
	for _, c := range cols {
		lines = append(lines, fmt.Sprintf("%-13s %s", c.name, c.of(d)))
	}
	return "CREATE TABLE IF NOT EXISTS " + tbl + " (\n\t" + strings.Join(append(lines, keys...), ",\n\t") + "\n)" + options
}

// addColumns returns, for each of names, the DDL that adds that column of
// cols to tbl as d declares it.
func addColumns(d Dialect, tbl string, cols []column, names ...string) []string {
	ddls := make([]string, len(names))
	for i, name := range names {
		c := cols[slices.IndexFunc(cols, func(c column) bool { return c.name == name })]
		ddls[i] = `ALTER TABLE ` + tbl + ` ADD COLUMN ` + name + ` ` + c.of(d)
	}
	return ddls
}

// mysqlText is the character set and collation of the MySQL family's
// text columns: every code point, compared byte by byte.
const mysqlText = "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"

// recordColumns are the columns of the records table.
var recordColumns = []column{
	{"key_hash", "bytea PRIMARY KEY", "BINARY(32) NOT NULL", "BLOB NOT NULL PRIMARY KEY"},
	{"key_text", "text NOT NULL", "MEDIUMTEXT " + mysqlText + " NOT NULL", "TEXT NOT NULL"},
	{"state", "smallint NOT NULL", "TINYINT NOT NULL", "INTEGER NOT NULL"},
	{"fence", "bigint NOT NULL", "BIGINT NOT NULL", "INTEGER NOT NULL"},
	{"token", "text NOT NULL", "BLOB NOT NULL", "TEXT NOT NULL"},
	{"lease_until", "bigint NOT NULL", "BIGINT NOT NULL", "INTEGER NOT NULL"},
	{"expires_at", "bigint NOT NULL", "BIGINT NOT NULL", "INTEGER NOT NULL"},
	{"fingerprint", "bytea", "VARBINARY(32) NULL", "BLOB"},
	{"origin", "text", "VARCHAR(128) " + mysqlText + " NULL", "TEXT"},
	{"attempts", "integer", "INT NULL", "INTEGER"},
	{"reason", "text", "VARCHAR(256) " + mysqlText + " NULL", "TEXT"},
	{"first_failure", "bigint", "BIGINT NULL", "INTEGER"},
}

// recordSchema sets the DDL of s: create makes the records table tbl in
// dialect d, and the rest adds the columns an older table lacks.
func (s *statements) recordSchema(d Dialect, tbl string, create ...string) {
	s.create = create
	s.addColumns = addColumns(d, tbl, recordColumns, addedColumns[:]...)
}
