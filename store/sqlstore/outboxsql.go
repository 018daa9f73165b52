package sqlstore

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
)

// outboxSQL is the outbox of one store: its table beside the records' and
// the texts of its statements; one row per message (docs/stores/sql.md, "The
// outbox", lists the columns). A sent message is deleted; a dead one stays
// until revived. lease_until carries every reason a message is not takeable
// (a lease, a backoff, deadHolds), so "an earlier message of the key is held"
// is lease_until > now.
type outboxSQL struct {
	table   table  // "<records>_outbox"
	ref     string // its quoted reference in statements
	channel string // PostgreSQL: the channel CompleteTx notifies
	now     string // the database's clock, in ms
	// numbered: $1, $2, … placeholders (PostgreSQL, SQLite); else '?'.
	numbered bool
	// skipLocked: Take locks its candidates FOR UPDATE SKIP LOCKED in a
	// transaction (PostgreSQL, MySQL, MariaDB); else one UPDATE decides
	// (SQLite, whose writers take turns).
	skipLocked bool
	create     []string
	// addColumns is the DDL that adds the columns of dead messages to an
	// outbox table made before them.
	addColumns []string
}

// deadHolds is the lease_until of a dead message that holds its key:
// beyond every clock, so that it is never taken and every later message
// of its key waits behind it.
const deadHolds = math.MaxInt64

// deadColumns are the columns of failures and dead messages, which outbox
// tables of earlier versions lack.
var deadColumns = []string{"attempts", "reason", "died_at"}

// newOutboxSQL returns the outbox of records table t in dialect d.
func newOutboxSQL(d Dialect, t table) *outboxSQL {
	o := &outboxSQL{table: table{schema: t.schema, name: t.name + "_outbox"}}
	idx := o.table.name + "_order"
	switch d {
	case MySQL, MariaDB:
		o.ref, o.now, o.skipLocked = o.table.ref(backquote), mysqlNow, true
		o.create = []string{createTable(d, o.ref, outboxColumns, " ENGINE = InnoDB", "PRIMARY KEY (id)", "KEY "+backquote(idx)+" (order_hash, id)")}
	case SQLite:
		o.ref, o.now, o.numbered = o.table.ref(doubleQuote), sqliteNow, true
		o.create = []string{createTable(d, o.ref, outboxColumns, " STRICT"),
			`CREATE INDEX IF NOT EXISTS ` + o.table.qualify(doubleQuote, idx) + ` ON ` + doubleQuote(o.table.name) + ` (order_hash, id)`,
		}
	default: // PostgreSQL
		o.ref, o.now, o.numbered, o.skipLocked = o.table.ref(doubleQuote), pgNow, true, true
		o.create = []string{createTable(d, o.ref, outboxColumns, ""),
			`CREATE INDEX IF NOT EXISTS ` + doubleQuote(idx) + ` ON ` + o.ref + ` (order_hash, id)`,
		}
		// A channel name is at most 63 bytes.
		o.channel = o.table.String()
		if len(o.channel) > 63 {
			h := sha256.Sum256([]byte(o.channel))
			o.channel = "idemgate_outbox_" + hex.EncodeToString(h[:16])
		}
	}
	o.addColumns = addColumns(d, o.ref, outboxColumns, deadColumns...)
	return o
}

// outboxColumns are the columns of the outbox table. On SQLite,
// AUTOINCREMENT: a rowid is never reused, even after the row with the
// highest one is deleted, so an id names one message for good.
var outboxColumns = []column{
	{"id", "bigserial PRIMARY KEY", "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT", "INTEGER PRIMARY KEY AUTOINCREMENT"},
	{"topic", "text NOT NULL", "TEXT " + mysqlText + " NOT NULL", "TEXT NOT NULL"},
	{"ordering_key", "text NOT NULL", "TEXT " + mysqlText + " NOT NULL", "TEXT NOT NULL"},
	{"order_hash", "bytea", "BINARY(32) NULL", "BLOB"},
	{"child_key", "text NOT NULL", "CHAR(64) CHARACTER SET ascii NOT NULL", "TEXT NOT NULL"},
	{"data", "bytea NOT NULL", "LONGBLOB NOT NULL", "BLOB NOT NULL"},
	{"attributes", "text NOT NULL", "MEDIUMTEXT " + mysqlText + " NOT NULL", "TEXT NOT NULL"},
	{"enqueued_at", "bigint NOT NULL", "BIGINT NOT NULL", "INTEGER NOT NULL"},
	{"lease_until", "bigint NOT NULL DEFAULT 0", "BIGINT NOT NULL DEFAULT 0", "INTEGER NOT NULL DEFAULT 0"},
	{"taker", "text", "VARCHAR(64) CHARACTER SET ascii NULL", "TEXT"},
	{"attempts", "integer NOT NULL DEFAULT 0", "INT NOT NULL DEFAULT 0", "INTEGER NOT NULL DEFAULT 0"},
	{"reason", "text NOT NULL DEFAULT ''", "VARCHAR(512) " + mysqlText + " NOT NULL DEFAULT ''", "TEXT NOT NULL DEFAULT ''"},
	{"died_at", "bigint", "BIGINT NULL", "INTEGER"},
}

// ph returns the placeholder of argument n (1-based).
func (o *outboxSQL) ph(n int) string {
	if o.numbered {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// list returns count placeholders from argument first on, comma-separated;
// each entry is width placeholders in parentheses when width > 1.
func (o *outboxSQL) list(first, count, width int) string {
	var b strings.Builder
	n := first
	for i := range count {
		if i > 0 {
			b.WriteString(", ")
		}
		if width > 1 {
			b.WriteByte('(')
		}
		for j := range width {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(o.ph(n))
			n++
		}
		if width > 1 {
			b.WriteByte(')')
		}
	}
	return b.String()
}

// insert writes count messages: per row topic, ordering key, order hash,
// child key, data, attributes.
func (o *outboxSQL) insert(count int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO ` + o.ref + ` (topic, ordering_key, order_hash, child_key, data, attributes, enqueued_at) VALUES `)
	n := 1
	for i := range count {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for range 6 {
			b.WriteString(o.ph(n) + ", ")
			n++
		}
		b.WriteString(o.now + ")")
	}
	return b.String()
}

// takeColumns are what Take reads of a row: id, topic, ordering key,
// child key, data, attributes, how long it has waited (ms) and its
// attempts.
func (o *outboxSQL) takeColumns(alias string) string {
	a := alias
	if a != "" {
		a += "."
	}
	return a + `id, ` + a + `topic, ` + a + `ordering_key, ` + a + `child_key, ` + a + `data, ` + a + `attributes, ` +
		o.now + ` - ` + a + `enqueued_at, ` + a + `attempts`
}

// free is the condition on the row of alias c that it may be taken, by
// itself, at now (a placeholder): it lives, and its lease or backoff ran
// out.
func (o *outboxSQL) free(c, now string) string {
	return c + `.lease_until <= ` + now + ` AND ` + c + `.died_at IS NULL`
}

// unblocked is the condition on the row of alias c that no earlier
// message of its order key is held, backing off, or dead and holding it,
// at now (a placeholder).
func (o *outboxSQL) unblocked(c, now string) string {
	return `(` + c + `.order_hash IS NULL OR NOT EXISTS (
		SELECT 1 FROM ` + o.ref + ` p WHERE p.order_hash = ` + c + `.order_hash AND p.id < ` + c + `.id AND p.lease_until > ` + now + `))`
}

// clock reads the database's clock once, in ms, for Take's statement to
// judge every row at that instant. On PostgreSQL it also turns off, for the
// Take's transaction, synchronous_commit, enable_seqscan and jit
// (docs/stores/sql.md, "PostgreSQL settings of a Take and a Settle").
func (o *outboxSQL) clock() string {
	if o.channel != "" { // PostgreSQL
		return `SELECT ` + o.now + ` FROM set_config('jit', 'off', true) j, set_config('enable_seqscan', 'off', true) s, set_config('synchronous_commit', 'off', true) c`
	}
	return `SELECT ` + o.now
}

// candidates selects, by id, the order hash and prev, up to limit messages
// free and unblocked at now, oldest first, locking them FOR UPDATE SKIP
// LOCKED. prev is, for an ordered message, the id of the one before it on
// its key that holds it (NULL for none): Take keeps a message only behind
// one it keeps too, since that one may be locked by a Take in flight. The
// rows behind a blocked message are left out here, before the LIMIT, so they
// never fill the window.
func (o *outboxSQL) candidates(columns string, now, limit func() string) string {
	prev := `CASE WHEN o.order_hash IS NULL THEN NULL ELSE (SELECT MAX(p.id) FROM ` + o.ref +
		` p WHERE p.order_hash = o.order_hash AND p.id < o.id AND (p.died_at IS NULL OR p.lease_until > 0)) END`
	where := o.free("o", now())
	where += ` AND ` + o.unblocked("o", now())
	return `SELECT ` + columns + `, ` + prev + ` AS prev FROM ` + o.ref + ` o WHERE ` + where +
		` ORDER BY o.id LIMIT ` + limit() + ` FOR UPDATE SKIP LOCKED`
}

// takeLocked selects the candidates (MySQL, MariaDB): Take's columns and
// prev, for up to $3 (?) messages at the clock reading now; it returns the
// statement and its arguments. Take then drops those behind a message it
// does not keep, and leases the rest.
func (o *outboxSQL) takeLocked(n int, now int64) (string, []any) {
	var args []any
	arg := func(v any) func() string {
		return func() string {
			args = append(args, v)
			return o.ph(len(args))
		}
	}
	return o.candidates(o.takeColumns("o"), arg(now), arg(n)), args
}

// takePostgres takes, in one statement, up to $3 messages free and unblocked
// at $4 (ms), oldest first, for token $1 and $2 ms: it keeps each candidate
// unless one of its key at or before it is broken (its prev is not among the
// candidates: locked by a Take in flight). Its text does not depend on n.
func (o *outboxSQL) takePostgres() string {
	lit := func(s string) func() string { return func() string { return s } }
	return `WITH c AS (` + o.candidates(`o.id, o.order_hash`, lit("$4"), lit("$3")) + `),
	broken AS (SELECT b.id, b.order_hash FROM c b WHERE b.prev IS NOT NULL AND NOT EXISTS (SELECT 1 FROM c x WHERE x.id = b.prev)),
	k AS (SELECT c.id FROM c WHERE NOT EXISTS (SELECT 1 FROM broken b WHERE b.order_hash = c.order_hash AND b.id <= c.id))
UPDATE ` + o.ref + ` AS o SET taker = $1, lease_until = ` + o.now + ` + $2 FROM k WHERE o.id = k.id RETURNING ` + o.takeColumns("o")
}

// lease holds count messages, by id from $3 on, for the Take of token $1
// for $2 ms.
func (o *outboxSQL) lease(count int) string {
	return `UPDATE ` + o.ref + ` SET taker = ` + o.ph(1) + `, lease_until = ` + o.now + ` + ` + o.ph(2) + ` WHERE id IN (` + o.list(3, count, 1) + `)`
}

// takeSQLite takes, in one statement, up to $3 messages free and unblocked
// at $4 (ms), oldest first, for token $1 and $2 ms. SQLite runs one writer
// at a time, so nothing changes between the choice and the write.
func (o *outboxSQL) takeSQLite() string {
	return `UPDATE ` + o.ref + ` AS o SET taker = $1, lease_until = ` + o.now + ` + $2 WHERE o.id IN (
	SELECT c.id FROM ` + o.ref + ` c WHERE ` + o.free("c", "$4") + ` AND ` + o.unblocked("c", "$4") + `
	ORDER BY c.id LIMIT $3
) RETURNING ` + o.takeColumns("")
}

// statement is one statement and its arguments.
type statement struct {
	q    string
	args []any
}

// deleteSent returns the statements that delete the sent messages by id and
// child key (the pair, so that a message is never taken for another): on
// PostgreSQL one statement whatever the count, with synchronous_commit off;
// elsewhere one per maxTake messages (docs/stores/sql.md, "PostgreSQL
// settings of a Take and a Settle").
func (o *outboxSQL) deleteSent(ids []int64, childKeys []string) []statement {
	if len(ids) == 0 {
		return nil
	}
	if o.channel != "" { // PostgreSQL
		q := `WITH c AS (SELECT set_config('synchronous_commit', 'off', true)) DELETE FROM ` + o.ref +
			` o USING unnest($1::bigint[], $2::text[]) AS s(id, child_key), c WHERE o.id = s.id AND o.child_key = s.child_key`
		return []statement{{q, []any{pgArray(ids, func(id int64) string { return strconv.FormatInt(id, 10) }), pgArray(childKeys, quoteArrayElem)}}}
	}
	var out []statement
	for first := 0; first < len(ids); first += maxTake {
		last := min(len(ids), first+maxTake)
		args := make([]any, 0, 2*(last-first))
		for i := first; i < last; i++ {
			args = append(args, ids[i], childKeys[i])
		}
		for i := first; i < last; i++ {
			args = append(args, ids[i])
		}
		// The id list lets InnoDB find the rows by the primary key, locking
		// no row that a Take beside it would then skip.
		out = append(out, statement{`DELETE FROM ` + o.ref + ` WHERE (id, child_key) IN (` + o.list(1, last-first, 2) +
			`) AND id IN (` + o.list(1+2*(last-first), last-first, 1) + `)`, args})
	}
	return out
}

// pgArray renders vs as a PostgreSQL array literal, each element by elem.
func pgArray[T any](vs []T, elem func(T) string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem(v))
	}
	b.WriteByte('}')
	return b.String()
}

// quoteArrayElem quotes s as an element of an array literal.
func quoteArrayElem(s string) string {
	return `"` + arrayEscaper.Replace(s) + `"`
}

var arrayEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// giveBack renders the statement that ends the lease of the messages ids
// that the Take of f.token still holds, as f says, and its arguments.
func (o *outboxSQL) giveBack(f failure, ids []any) (string, []any) {
	args := make([]any, 0, len(ids)+3)
	arg := func(v any) string {
		args = append(args, v)
		return o.ph(len(args))
	}
	set := `taker = NULL`
	if f.reason != "" {
		set += `, attempts = attempts + 1, reason = ` + arg(f.reason)
	}
	switch {
	case !f.dead:
		set += `, lease_until = ` + o.now + ` + ` + arg(f.after)
	case f.release:
		set += `, lease_until = 0, died_at = ` + o.now
	default:
		set += `, lease_until = ` + strconv.FormatInt(deadHolds, 10) + `, died_at = ` + o.now
	}
	taker := arg(f.token)
	q := `UPDATE ` + o.ref + ` SET ` + set + ` WHERE taker = ` + taker + ` AND id IN (` + o.list(len(args)+1, len(ids), 1) + `)`
	return q, append(args, ids...)
}

// stats counts the live messages, reads how long the oldest of them has
// waited (ms; NULL when none) and counts the dead ones, in one scan.
func (o *outboxSQL) stats() string {
	return `SELECT COUNT(CASE WHEN died_at IS NULL THEN 1 END), ` + o.now + ` - MIN(CASE WHEN died_at IS NULL THEN enqueued_at END), ` +
		`COUNT(died_at) FROM ` + o.ref
}

// backlog counts the live messages.
func (o *outboxSQL) backlog() string {
	return `SELECT COUNT(*) FROM ` + o.ref + ` WHERE died_at IS NULL`
}

// dead lists up to $1 dead messages, the longest dead first: Take's
// columns, then reason, died_at and lease_until.
func (o *outboxSQL) dead() string {
	return `SELECT ` + o.takeColumns("") + `, reason, died_at, lease_until FROM ` + o.ref +
		` WHERE died_at IS NOT NULL ORDER BY died_at, id LIMIT ` + o.ph(1)
}

// revive makes count dead messages, by id from $1 on, takeable at once
// with no attempts. The reason stays, for the record, until the next
// failure replaces it.
func (o *outboxSQL) revive(count int) string {
	return `UPDATE ` + o.ref + ` SET died_at = NULL, lease_until = 0, taker = NULL, attempts = 0 WHERE died_at IS NOT NULL AND id IN (` +
		o.list(1, count, 1) + `)`
}
