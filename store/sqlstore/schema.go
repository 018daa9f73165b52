package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CreateTable makes the store's schema complete: the table and its index on
// expires_at (with Options.Outbox, the outbox table and its index too), and
// the fingerprint, origin and failure columns a table of an earlier version
// lacks (nullable, no rewrite). It looks first, in one statement, and runs
// DDL only for what is missing, so it may be called at start-up by a user
// without DDL rights once the schema is in place, and by instances starting
// together. It refuses a table whose key_hash is not unique as every Claim
// needs. On a table in use each DDL statement waits at most a second for
// its lock, and CreateTable tries again a few times within ctx
// (docs/stores/sql.md, "Upgrades next to live traffic").
func (s *Store) CreateTable(ctx context.Context) error {
	pause := ddlPause
	var err error
	for attempt := 1; ; attempt++ {
		st, lerr := s.lookSchema(ctx)
		if lerr != nil {
			return lerr
		}
		if st.complete() {
			return s.createOutbox(ctx)
		}
		if attempt > ddlAttempts {
			break
		}
		if err = s.upgrade(ctx, st); err == nil || !s.lockTimedOut(err) || attempt == ddlAttempts {
			// Done, or raced by another instance: look again.
			continue
		}
		// The table is locked: pause, so the transaction holding it can
		// finish, before the next try queues again.
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sqlstore: create table %s: %w (while waiting for a lock: %w)", s.table, ctx.Err(), err)
		case <-t.C:
		}
		pause *= 2
	}
	switch {
	case err == nil:
		err = errors.New("the schema is still incomplete after its DDL ran")
	case s.lockTimedOut(err):
		return fmt.Errorf("sqlstore: create table %s: the table stayed locked (%d tries, each waiting %v): a transaction on it is still open, "+
			"so start again later or run the DDL of docs/stores/sql.md by hand: %w", s.table, ddlAttempts, ddlLockTimeout, err)
	}
	return fmt.Errorf("sqlstore: create table %s: %w", s.table, err)
}

// Bounds of the DDL that CreateTable runs on a table in use. Every
// statement on a table queues behind DDL that waits for the table's lock,
// so the lock timeout bounds how long the DDL can stall them. MySQL counts
// it in whole seconds.
const (
	ddlLockTimeout = time.Second            // each statement's wait for its lock
	ddlAttempts    = 5                      // tries while the table stays locked
	ddlPause       = 250 * time.Millisecond // before the second try; doubled after each
)

// upgrade runs the DDL for what st lacks: on a dedicated connection, each
// statement waiting at most ddlLockTimeout for its lock.
func (s *Store) upgrade(ctx context.Context, st schemaState) error {
	if st.index == indexBuilding {
		return s.awaitIndexBuild(ctx)
	}
	var ddls []string
	if !st.table {
		ddls = s.q.create
	} else {
		_, ddls = s.missingColumns(st)
		if st.index == indexInvalid {
			ddls = append(ddls, `DROP INDEX CONCURRENTLY IF EXISTS `+s.table.qualify(doubleQuote, s.table.index()))
		}
		if st.index != indexValid {
			ddls = append(ddls, s.addIndex())
		}
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	set, reset := s.lockTimeoutSQL(ddlLockTimeout)
	if set != "" {
		if _, err := conn.ExecContext(ctx, set); err != nil {
			return err
		}
	}
	for _, ddl := range ddls {
		if _, err = conn.ExecContext(ctx, ddl); err != nil {
			break
		}
	}
	if reset != "" {
		if _, rerr := conn.ExecContext(ctx, reset); rerr != nil {
			// Keep the setting out of the pool: discard the connection.
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	return err
}

// errIndexBuilding says that another session seems to be building the
// index still, after awaitIndexBuild waited for it.
var errIndexBuilding = errors.New("the index on expires_at is still being built by another session (CREATE INDEX CONCURRENTLY)")

// buildPoll is how often awaitIndexBuild looks at another session's build.
const buildPoll = 100 * time.Millisecond

// awaitIndexBuild waits at most ddlLockTimeout, as DDL waits for its lock,
// for another session's build of the index to end, valid or INVALID, for
// the next look to act on; errIndexBuilding if it has not ended.
func (s *Store) awaitIndexBuild(ctx context.Context) error {
	deadline := time.NewTimer(ddlLockTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(buildPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return errIndexBuilding
		case <-poll.C:
		}
		st, err := s.lookSchema(ctx)
		if err != nil || st.index != indexBuilding {
			return err
		}
	}
}

// addIndex builds the index on expires_at on a table that exists, without
// blocking writes where the dialect can. (SQLite runs one writer at a time.)
func (s *Store) addIndex() string {
	switch {
	case s.spec.mysql:
		return `ALTER TABLE ` + s.table.ref(backquote) + ` ADD INDEX ` + backquote(s.table.index()) + ` (expires_at), ALGORITHM = INPLACE, LOCK = NONE`
	case s.spec.prepare:
		return s.q.create[len(s.q.create)-1]
	}
	// CONCURRENTLY runs outside a transaction; the index is created in the
	// table's schema.
	return `CREATE INDEX CONCURRENTLY IF NOT EXISTS ` + doubleQuote(s.table.index()) + ` ON ` + s.table.ref(doubleQuote) + ` (expires_at)`
}

// lockTimeoutSQL returns the statements that bound, then restore, a
// session's wait for locks. SQLite waits for its lock at most the busy
// timeout of the connection, and nothing queues behind a waiting writer.
func (s *Store) lockTimeoutSQL(d time.Duration) (set, reset string) {
	switch {
	case s.spec.mysql:
		secs := max(1, int64((d+time.Second-1)/time.Second))
		return "SET SESSION lock_wait_timeout = " + strconv.FormatInt(secs, 10), "SET SESSION lock_wait_timeout = DEFAULT"
	case s.spec.prepare:
		return "", ""
	}
	return "SET lock_timeout = '" + strconv.FormatInt(max(1, d.Milliseconds()), 10) + "ms'", "RESET lock_timeout"
}

// lockTimedOut reports whether err is DDL giving up on its lock:
// PostgreSQL's lock_not_available (55P03), MySQL's lock wait timeout
// (1205), SQLite's busy or locked database; or errIndexBuilding.
func (s *Store) lockTimedOut(err error) bool {
	if errors.Is(err, errIndexBuilding) {
		return true
	}
	if n, ok := mysqlErrorNumber(err); ok {
		return n == 1205
	}
	return pgState(err) == "55P03" || sqliteTransient(err)
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

// schemaHint explains err when it is the database's complaint that the
// table does not exist (CreateTable has not run), or lacks a column: the table was created by an earlier version, before
// the store kept payload fingerprints, origins or failures, and CreateTable, which
// adds them, has not run since. It looks the schema up (this path only) to
// name exactly the columns missing and the DDL that adds each.
func (s *Store) schemaHint(ctx context.Context, err error) error {
	if missingTable(err) {
		return &noTableError{s.table.String(), "call CreateTable when the service starts (docs/stores/sql.md has its DDL)", err}
	}
	if !missingColumn(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ddlLockTimeout)
	defer cancel()
	var cols, ddls []string
	if st, lerr := s.lookSchema(ctx); lerr == nil && st.table {
		cols, ddls = s.missingColumns(st)
	}
	if len(cols) == 0 {
		// The lookup failed, or the column was added since the statement
		// failed (CreateTable in another instance): name the one the
		// database named.
		for i, col := range addedColumns {
			if strings.Contains(err.Error(), col) {
				cols, ddls = []string{col}, []string{s.q.addColumns[i]}
				break
			}
		}
		if len(cols) == 0 {
			return err
		}
	}
	noun := "column"
	if len(cols) > 1 {
		noun = "columns"
	}
	return fmt.Errorf("table %s lacks the %s %s (it was made by an earlier version): call CreateTable, or run %s: %w",
		s.table, noun, joinAnd(cols), strings.Join(ddls, "; "), err)
}

// missingColumns returns the added columns that st lacks, and their DDL.
func (s *Store) missingColumns(st schemaState) (cols, ddls []string) {
	for i, col := range addedColumns {
		if st.added&(1<<i) == 0 {
			cols, ddls = append(cols, col), append(ddls, s.q.addColumns[i])
		}
	}
	return cols, ddls
}

// joinAnd lists names as prose: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// noTableError is a statement's failure on a table that does not exist,
// said as what to do; the database's own error is its cause.
type noTableError struct {
	table, fix string
	err        error
}

func (e *noTableError) Error() string { return "table " + e.table + " does not exist: " + e.fix }
func (e *noTableError) Unwrap() error { return e.err }

// noTable explains err when the outbox's table does not exist.
func (o *Outbox) noTable(err error) error {
	if !missingTable(err) {
		return err
	}
	return &noTableError{o.s.ob.table.String(), "give Options.Outbox and call CreateTable when the service starts", err}
}

// missingTable reports whether err is an unknown-table error of
// PostgreSQL (SQLSTATE 42P01), MySQL (1146) or SQLite (SQLITE_ERROR, "no
// such table").
func missingTable(err error) bool {
	if pgState(err) == "42P01" {
		return true
	}
	if n, ok := mysqlErrorNumber(err); ok {
		return n == 1146
	}
	var e interface{ Code() int }
	return errors.As(err, &e) && e.Code() == 1 && strings.Contains(err.Error(), "no such table")
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
