package sqlstore

import (
	"fmt"
	"regexp"
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
