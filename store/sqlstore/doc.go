// Package sqlstore is a [store.Store] that keeps its records in a SQL
// table, through database/sql: PostgreSQL, MySQL, MariaDB or SQLite.
//
// The store writes SQL for one [Dialect] and imports no database/sql
// driver; open the *sql.DB with the driver of your choice and hand it over:
//
//	db, err := sql.Open("pgx", "postgres://app@db:5432/app") // import _ "github.com/jackc/pgx/v5/stdlib"
//	…
//	s, err := sqlstore.New(db, sqlstore.PostgreSQL, &sqlstore.Options{TTL: 24 * time.Hour})
//	…
//	err = s.CreateTable(ctx) // once, at start-up; or create it by hand
//
// # Records
//
// A record is one row keyed on the SHA-256 of its key (the key itself is
// kept alongside, for people reading the table). Instants are BIGINT
// milliseconds since the Unix epoch, always computed by the database from
// its own clock inside the statement that uses them: clients may disagree
// about the time, the database never does with itself. Expiry is lazy:
// every statement works out from the clock whether a record is still
// alive, so an expired row behaves as absent until [Store.PurgeExpired]
// deletes it.
//
// The state column holds 1 for CLAIMED, 2 for DONE and 3 for FAILED (see
// store.Failer). A record also keeps the payload fingerprint of the Claim
// that won it and the origin it named (see store.ClaimOptions) in
// nullable columns, fingerprint and origin, which travel in the Claim
// statement itself; and its failures in three more,
// NULL until an attempt fails: attempts (the count of failed attempts),
// reason (the last one's) and first_failure (the first one's instant).
// Tables created before one of these columns existed lack it:
// [Store.CreateTable] adds each missing one, or run the ALTER TABLE given
// in docs/stores/sql.md.
//
// # Statements
//
// Each operation is one statement, which decides and writes atomically:
// Claim is an upsert (INSERT … ON CONFLICT DO UPDATE on PostgreSQL and
// SQLite, INSERT … ON DUPLICATE KEY UPDATE on MySQL and MariaDB) that
// returns the record as it leaves it, and Complete, Release, Extend and
// Fail are single-row UPDATEs guarded by the fence (Forget and Retry by
// the key alone). A fresh message therefore costs two statements (Claim,
// Complete, or Claim, Fail) and a duplicate one. A Claim that finds the
// record DONE or FAILED answers from a read and writes nothing: on PostgreSQL in
// the same statement, on SQLite, which has no INSERT inside WITH, in a read
// of its own that runs before the upsert (in process, so a fresh message's
// third statement costs microseconds); MariaDB's upsert writes nothing on a
// DONE or FAILED record already. MySQL, which lacks INSERT … RETURNING, needs a second
// statement per Claim to read the answer back. Deadlocks, serialization failures and SQLITE_BUSY are retried
// inside the store a bounded number of times, with the Claim's token kept,
// so that contention on a key does not surface as errors. On PostgreSQL, a
// store that meets a serialization failure (the database runs above READ
// COMMITTED) switches for good to a Claim in which losers write nothing;
// READ COMMITTED, the default, remains the level to give the store's user
// (see the docs).
//
// # Completing inside your transaction
//
// When the side effect is a row in the same database as the records,
// [Store.CompleteTx] records a claim done inside the caller's *sql.Tx
// ([Store.CompletePgxTx] inside a pgx.Tx), fence-checked, so that the
// business rows and DONE commit together or not at all. A holder that lost
// its key to a takeover gets an error matching store.ErrFenced and rolls
// back: its writes never land, where a separate Complete could only refuse
// to record work already written.
//
// # Drivers
//
// PostgreSQL: github.com/jackc/pgx/v5/stdlib. Its default statement cache
// makes every operation one round trip after its first use on a connection.
//
// MySQL and MariaDB: github.com/go-sql-driver/mysql. Set interpolateParams=true
// in the DSN: without it, the driver prepares, executes and closes a server
// statement for every call, two round trips instead of one. The store reads
// no dates, so parseTime is not needed.
//
// SQLite: modernc.org/sqlite (driver "sqlite", no cgo). Use a file database
// in WAL mode with a busy timeout, and one connection:
//
//	db, err := sql.Open("sqlite", "/var/lib/app/idemgate.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
//	db.SetMaxOpenConns(1)
//
// Every operation of the store but a duplicate's Claim writes, and SQLite
// admits one writer at a time; with several connections, the waiting happens in SQLite's busy
// handler, which polls with sleeps. One connection makes database/sql queue
// the callers instead, which is fair and wastes no time. The store is still
// correct with more connections.
//
// That connection is also what the gateway's lease renewal needs. A body
// whose transaction holds it (or, with more connections, holds SQLite's
// write lock) delays every renewal until it ends, and loses its claim if
// that is too late: Extend's error then says so. A transaction that calls
// [Store.CompleteTx] first ends the renewal and may run as long as it
// needs; keep any other transaction well under half the gateway's lease.
//
// See docs/stores/sql.md in the repository for the schema of each dialect,
// the statements and how to run the purge.
package sqlstore
