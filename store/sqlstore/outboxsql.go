package sqlstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// outboxSQL is the outbox of one store: its table, beside the records'
// one, and the texts of its statements. Each row is one message:
//
//	id          ascending, never reused: the enqueue order
//	topic, ordering_key, data, attributes (a JSON object), child_key
//	order_hash  SHA-256 of topic and ordering key; NULL when unordered
//	enqueued_at when CompleteTx wrote it, ms on the database's clock
//	lease_until until when a Take holds it (0: never taken or given back)
//	taker       the token of the Take that holds it (NULL: none)
//
// A sent message is deleted.
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
}

// newOutboxSQL returns the outbox of records table t in dialect d.
func newOutboxSQL(d Dialect, t table) *outboxSQL {
	o := &outboxSQL{table: table{schema: t.schema, name: t.name + "_outbox"}}
	idx := o.table.name + "_order"
	switch d {
	case MySQL, MariaDB:
		o.ref, o.now, o.skipLocked = o.table.ref(backquote), mysqlNow, true
		o.create = []string{`CREATE TABLE IF NOT EXISTS ` + o.ref + ` (
	id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
	topic        TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
	ordering_key TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
	order_hash   BINARY(32) NULL,
	child_key    CHAR(64) CHARACTER SET ascii NOT NULL,
	data         LONGBLOB NOT NULL,
	attributes   MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
	enqueued_at  BIGINT NOT NULL,
	lease_until  BIGINT NOT NULL DEFAULT 0,
	taker        VARCHAR(64) CHARACTER SET ascii NULL,
	PRIMARY KEY (id),
	KEY ` + backquote(idx) + ` (order_hash, id)
) ENGINE = InnoDB`}
	case SQLite:
		o.ref, o.now, o.numbered = o.table.ref(doubleQuote), sqliteNow, true
		// AUTOINCREMENT: a rowid is never reused, even after the row with
		// the highest one is deleted, so an id names one message for good.
		o.create = []string{`CREATE TABLE IF NOT EXISTS ` + o.ref + ` (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	topic        TEXT    NOT NULL,
	ordering_key TEXT    NOT NULL,
	order_hash   BLOB,
	child_key    TEXT    NOT NULL,
	data         BLOB    NOT NULL,
	attributes   TEXT    NOT NULL,
	enqueued_at  INTEGER NOT NULL,
	lease_until  INTEGER NOT NULL DEFAULT 0,
	taker        TEXT
) STRICT`,
			`CREATE INDEX IF NOT EXISTS ` + o.table.qualify(doubleQuote, idx) + ` ON ` + doubleQuote(o.table.name) + ` (order_hash, id)`,
		}
	default: // PostgreSQL
		o.ref, o.now, o.numbered, o.skipLocked = o.table.ref(doubleQuote), pgNow, true, true
		o.create = []string{`CREATE TABLE IF NOT EXISTS ` + o.ref + ` (
	id           bigserial PRIMARY KEY,
	topic        text   NOT NULL,
	ordering_key text   NOT NULL,
	order_hash   bytea,
	child_key    text   NOT NULL,
	data         bytea  NOT NULL,
	attributes   text   NOT NULL,
	enqueued_at  bigint NOT NULL,
	lease_until  bigint NOT NULL DEFAULT 0,
	taker        text
)`,
			`CREATE INDEX IF NOT EXISTS ` + doubleQuote(idx) + ` ON ` + o.ref + ` (order_hash, id)`,
		}
		// A channel name is at most 63 bytes.
		o.channel = o.table.String()
		if len(o.channel) > 63 {
			h := sha256.Sum256([]byte(o.channel))
			o.channel = "idemgate_outbox_" + hex.EncodeToString(h[:16])
		}
	}
	return o
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
// child key, data, attributes and how long it has waited (ms).
func (o *outboxSQL) takeColumns(alias string) string {
	a := alias
	if a != "" {
		a += "."
	}
	return a + `id, ` + a + `topic, ` + a + `ordering_key, ` + a + `child_key, ` + a + `data, ` + a + `attributes, ` + o.now + ` - ` + a + `enqueued_at`
}

// takeLocked selects up to $1 messages whose lease lapsed, oldest first,
// locking them and skipping those another transaction has locked (a Take
// or a Settle in flight). Take then keeps those of an ordering key only
// behind a message it keeps too.
func (o *outboxSQL) takeLocked() string {
	// prev: for an ordered message, the id of the one before it on its
	// key (NULL for none, or unordered).
	prev := `CASE WHEN o.order_hash IS NULL THEN NULL ELSE (SELECT MAX(p.id) FROM ` + o.ref + ` p WHERE p.order_hash = o.order_hash AND p.id < o.id) END`
	return `SELECT ` + o.takeColumns("o") + `, ` + prev + ` FROM ` + o.ref + ` o WHERE o.lease_until <= ` + o.now +
		` ORDER BY o.id LIMIT ` + o.ph(1) + ` FOR UPDATE SKIP LOCKED`
}

// lease holds count messages, by id from $3 on, for the Take of token $1
// for $2 ms.
func (o *outboxSQL) lease(count int) string {
	return `UPDATE ` + o.ref + ` SET taker = ` + o.ph(1) + `, lease_until = ` + o.now + ` + ` + o.ph(2) + ` WHERE id IN (` + o.list(3, count, 1) + `)`
}

// takeSQLite takes, in one statement, up to $3 messages whose lease
// lapsed, oldest first, for the token $1 and $2 ms: only those of whose
// ordering key no earlier message is held. Since the candidates come in
// id order and only a held message is not one, every earlier message of a
// taken one's key is taken too. SQLite runs one writer at a time, so
// nothing changes between the choice and the write.
func (o *outboxSQL) takeSQLite() string {
	return `UPDATE ` + o.ref + ` AS o SET taker = $1, lease_until = ` + o.now + ` + $2 WHERE o.id IN (
	SELECT c.id FROM ` + o.ref + ` c WHERE c.lease_until <= ` + o.now + `
	AND (c.order_hash IS NULL OR NOT EXISTS (
		SELECT 1 FROM ` + o.ref + ` p WHERE p.order_hash = c.order_hash AND p.id < c.id AND p.lease_until > ` + o.now + `))
	ORDER BY c.id LIMIT $3
) RETURNING ` + o.takeColumns("")
}

// deleteSent deletes count messages given as (id, child key) pairs from
// $1 on: the pair, not the id alone, so that a message is never taken for
// another.
func (o *outboxSQL) deleteSent(count int) string {
	return `DELETE FROM ` + o.ref + ` WHERE (id, child_key) IN (` + o.list(1, count, 2) + `)`
}

// giveBack ends the lease of count messages, by id from $2 on, that the
// Take of token $1 still holds.
func (o *outboxSQL) giveBack(count int) string {
	return `UPDATE ` + o.ref + ` SET taker = NULL, lease_until = 0 WHERE taker = ` + o.ph(1) + ` AND id IN (` + o.list(2, count, 1) + `)`
}

// backlog counts the messages.
func (o *outboxSQL) backlog() string { return `SELECT COUNT(*) FROM ` + o.ref }
