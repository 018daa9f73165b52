package sqlstore

import (
	"context"
	"errors"
	"fmt"
)

// sqliteNow is SQLite's clock in epoch milliseconds, one instant for a whole
// sqlite3_step (docs/stores/sql.md, "One reading, taken after the row lock").
const sqliteNow = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)`

func sqliteStatements(t table, ttl int64) statements {
	tbl := t.ref(doubleQuote)
	s, x := upsertStatements(tbl, sqliteNow, "MAX", ttl)
	// No INSERT inside WITH, and an INSERT takes the write lock even when it
	// writes nothing: a Claim reads first, in a statement of its own, and
	// upserts only when no DONE or FAILED record answered.
	s.claimFinal = x(finalRead)
	s.claim = x(expand(claimUpsert, "FIRST", "true"))
	// SQLite runs one writer at a time, so the batch it selects cannot
	// change before it is deleted.
	s.purge = x(`DELETE FROM {T} WHERE key_hash IN (
	SELECT key_hash FROM {T} WHERE expires_at < {NOW} ORDER BY expires_at LIMIT $1
)`)
	// In SQLite the schema qualifies the index, never the table.
	s.recordSchema(SQLite, tbl, createTable(SQLite, tbl, recordColumns, " STRICT, WITHOUT ROWID"),
		`CREATE INDEX IF NOT EXISTS `+t.qualify(doubleQuote, t.index())+` ON `+doubleQuote(t.name)+` (expires_at)`)
	return s
}

// sqliteWaitHint explains err when it is an Extend that ran out of time on
// SQLite waiting for a connection or the write lock, most likely held by the
// body's own transaction (docs/stores/sql.md, "SQLite settings").
func (s *Store) sqliteWaitHint(err error) error {
	if s.dialect != SQLite || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	const advice = "a lease cannot be renewed behind an open transaction: call CompleteTx first in the transaction " +
		"(the gateway then stops renewing), keep a transaction that does not begin with it well under half the gateway's Lease, " +
		"or raise Lease"
	if st := s.db.Stats(); st.MaxOpenConnections > 0 && st.InUse >= st.MaxOpenConnections {
		return fmt.Errorf("SQLite is served here on %d connection(s) (SetMaxOpenConns), all held until the deadline, "+
			"most likely by the body's own transaction; %s: %w", st.MaxOpenConnections, advice, err)
	}
	return fmt.Errorf("SQLite admits one writer, and a transaction on another connection held the write lock until the deadline, "+
		"most likely the body's own; %s: %w", advice, err)
}
