package sqlstore

import (
	"errors"
	"fmt"
	"reflect"
)

// Dialect is the SQL dialect spoken by the database behind a *sql.DB. The
// store writes its statements for exactly one dialect; the driver is the
// caller's choice and is never imported here.
type Dialect uint8

// The supported dialects. The zero Dialect is invalid.
const (
	// PostgreSQL 9.5 or later, for example through
	// github.com/jackc/pgx/v5/stdlib (driver name "pgx"). Every operation
	// is one statement.
	PostgreSQL Dialect = iota + 1

	// MySQL 5.7 or later through github.com/go-sql-driver/mysql. It also
	// works on MariaDB. MySQL has no INSERT … RETURNING, so a Claim is two
	// statements on one connection; every other operation is one.
	MySQL

	// MariaDB 10.5 or later through github.com/go-sql-driver/mysql. Every
	// operation is one statement: a Claim reads its outcome back with
	// INSERT … RETURNING.
	MariaDB

	// SQLite 3.37 or later, for example through modernc.org/sqlite (driver
	// name "sqlite", pure Go). A Claim reads first and upserts unless the
	// record is DONE or FAILED (both in process); see the package
	// documentation for the connection settings.
	SQLite
)

// String returns the dialect's name.
func (d Dialect) String() string {
	switch d {
	case PostgreSQL:
		return "PostgreSQL"
	case MySQL:
		return "MySQL"
	case MariaDB:
		return "MariaDB"
	case SQLite:
		return "SQLite"
	}
	return fmt.Sprintf("Dialect(%d)", uint8(d))
}

// spec is what a store needs to know about its dialect.
type spec struct {
	build func(t table, ttl int64) statements
	// mysql marks the MySQL family: UPDATE has no RETURNING and its
	// rows-affected count depends on a connection flag (CLIENT_FOUND_ROWS),
	// so Complete and Extend read their answer from LAST_INSERT_ID(expr);
	// and purges run under READ COMMITTED to take no gap locks.
	mysql bool
	// prepare keeps the statements prepared (see stmtCache).
	prepare bool
	// transient reports whether err is a deadlock, a serialization failure
	// or a busy database: the statement did nothing and may run again.
	transient func(err error) bool
}

func (d Dialect) spec() (spec, bool) {
	switch d {
	case PostgreSQL:
		return spec{build: postgresStatements, transient: pgTransient}, true
	case MySQL:
		return spec{build: mysqlStatements(false), mysql: true, transient: mysqlTransient}, true
	case MariaDB:
		return spec{build: mysqlStatements(true), mysql: true, transient: mysqlTransient}, true
	case SQLite:
		return spec{build: sqliteStatements, prepare: true, transient: sqliteTransient}, true
	}
	return spec{}, false
}

// statements are the SQL texts of one store: one dialect, one table, one
// ttl (in milliseconds, written into the texts as a literal).
type statements struct {
	// claim takes $1 key hash, $2 key, $3 token, $4 lease (ms), $5
	// fingerprint, $6 origin (NULL for none) and yields claimResult.
	claim query
	// claimNoWrite is PostgreSQL's Claim above READ COMMITTED (pgClaimNoWrite).
	claimNoWrite query
	// claimFinal, SQLite's, runs before claim: finalRead, $1 key hash.
	claimFinal query
	// claimRead, MySQL's, reads back what claim wrote; $1 token.
	claimRead query
	complete  query // $1 key hash, $2 fence, $3 token
	// completeTx matches only a CLAIMED record (completeTxUpdate); as complete.
	completeTx query
	// recordState reads state, fence, token and 1 if unexpired (else 0) for
	// CompleteTx when completeTx matched nothing. $1 key hash.
	recordState query
	release     query // $1 key hash, $2 fence, $3 token
	extend      query // $1 key hash, $2 fence, $3 lease (ms), $4 token
	purge       query // $1 batch size
	// fail: $1 key hash, $2 fence, $3 token, $4 reason, $5 failAt.
	fail query
	// create is the idempotent DDL of a new table, run in order.
	create []string
	// render writes another template as these are written.
	render func(tmpl string) query
	// addColumns add each of addedColumns to a table that lacks it.
	addColumns []string
}

// pgTransient recognises PostgreSQL's serialization_failure and
// deadlock_detected through the SQLState method of pgx's *pgconn.PgError
// (lib/pq's error has the same method).
func pgTransient(err error) bool {
	code := pgState(err)
	return code == pgSerializationFailure || code == "40P01"
}

// pgSerializationFailure is the SQLSTATE that only REPEATABLE READ and
// SERIALIZABLE raise.
const pgSerializationFailure = "40001"

// pgState returns the SQLSTATE of the PostgreSQL error in err's chain, or "".
func pgState(err error) string {
	var e interface{ SQLState() string }
	if !errors.As(err, &e) {
		return ""
	}
	return e.SQLState()
}

// sqliteTransient recognises SQLITE_BUSY and SQLITE_LOCKED, with any
// extended code, through the Code method of modernc.org/sqlite's *Error.
func sqliteTransient(err error) bool {
	var e interface{ Code() int }
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return true
	}
	return false
}

// mysqlTransient recognises a deadlock (1213, SQLSTATE 40001) and MariaDB's
// "record has changed since last read" (1020) under snapshot isolation.
func mysqlTransient(err error) bool {
	n, ok := mysqlErrorNumber(err)
	return ok && (n == 1213 || n == 1020)
}

// mysqlErrorNumber returns the server error number of the
// *mysql.MySQLError of github.com/go-sql-driver/mysql in err's chain. It
// reads the driver's exported Number field by reflection, so that this
// package links no driver: users of PostgreSQL or SQLite do not get MySQL's.
func mysqlErrorNumber(err error) (uint16, bool) {
	for ; err != nil; err = errors.Unwrap(err) {
		v := reflect.ValueOf(err)
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct || v.Type().Name() != "MySQLError" || v.Type().PkgPath() != "github.com/go-sql-driver/mysql" {
			continue
		}
		if f := v.FieldByName("Number"); f.Kind() == reflect.Uint16 {
			return uint16(f.Uint()), true
		}
	}
	return 0, false
}
