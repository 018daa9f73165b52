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
// A record is one row keyed on the SHA-256 of its key. Every operation is
// one statement that decides and writes atomically on the database's clock
// (a Claim is two on MySQL, and reads first on SQLite); a duplicate's Claim
// writes nothing. Expiry is lazy: an expired row behaves as absent until
// [Store.PurgeExpired] deletes it. Deadlocks, serialization failures and
// SQLITE_BUSY are retried inside the store a bounded number of times.
// Give the store's database user READ COMMITTED.
//
// [Store.CompleteTx] records a claim done inside the caller's *sql.Tx
// ([Store.CompletePgxTx] inside a pgx.Tx), fence-checked, so that the
// business rows and DONE commit together or not at all; with
// Options.Outbox it also enqueues messages that [Store.Outbox] relays.
//
// Drivers: github.com/jackc/pgx/v5/stdlib; github.com/go-sql-driver/mysql
// with interpolateParams=true (else each statement costs two round trips);
// modernc.org/sqlite on a file in WAL mode with a busy timeout and one
// connection (db.SetMaxOpenConns(1)).
//
// docs/stores/sql.md in the repository gives the schema of each dialect,
// the statements, CompleteTx, the outbox, purging and the SQLite settings.
package sqlstore
