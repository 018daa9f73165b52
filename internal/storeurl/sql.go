package storeurl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/idemgate/idemgate/store/sqlstore"
)

// sqlPingTimeout bounds the connection check at open.
const sqlPingTimeout = 10 * time.Second

// openSQL opens
//
//	postgres://user:pass@host:port/db[?param=…]   PostgreSQL through pgx (postgresql:// too)
//	mysql://user:pass@tcp(host:port)/db[?param=…] MySQL or MariaDB through go-sql-driver/mysql
//	sqlite:///absolute/path/file.db[?param=…]     SQLite through modernc.org/sqlite
//
// The parameter table names the store's table ("name" or "schema.name",
// default idemgate_records); every other parameter goes to the driver. The
// table is created when it is missing, if create is set. MySQL connections interpolate
// parameters unless the URL sets interpolateParams (one round trip per
// statement instead of two), and MariaDB 10.5 or later gets the MariaDB
// dialect. SQLite gets WAL mode and a 5s busy timeout unless the URL sets
// its own _pragma parameters, and one connection.
func openSQL(ctx context.Context, scheme, rawURL string, create bool) (*Opened, error) {
	shown := redactURL(rawURL)
	dsn, table, err := cutTableParam(scheme, rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	db, err := openDB(scheme, dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	st, err := openSQLStore(ctx, db, scheme, table, create)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	return &Opened{Store: st, Close: db.Close}, nil
}

// openDB returns a pool for dsn; it does no I/O.
func openDB(scheme, dsn string) (*sql.DB, error) {
	switch scheme {
	case "postgres", "postgresql":
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		return stdlib.OpenDB(*cfg), nil
	case "mysql":
		dsn = strings.TrimPrefix(dsn, "mysql://")
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		if _, query, _ := strings.Cut(dsn[strings.LastIndex(dsn, "/")+1:], "?"); !hasParam(query, "interpolateParams") {
			cfg.InterpolateParams = true
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		return sql.OpenDB(c), nil
	case "sqlite":
		path, query, _ := strings.Cut(strings.TrimPrefix(dsn, "sqlite://"), "?")
		if path == "" {
			return nil, errors.New("no database file (want sqlite:///path/to/file.db)")
		}
		if !hasParam(query, "_pragma") {
			query = strings.TrimPrefix(query+"&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)", "&")
		}
		c, err := sqlite.NewConnector(path + "?" + query)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(c)
		// Every operation of the store writes and SQLite has one writer at
		// a time: one connection makes callers queue in database/sql rather
		// than poll in SQLite's busy handler.
		db.SetMaxOpenConns(1)
		return db, nil
	}
	return nil, fmt.Errorf("not a SQL scheme: %q", scheme)
}

// openSQLStore pings db, picks the dialect and, if create is set, makes
// sure the table exists.
func openSQLStore(ctx context.Context, db *sql.DB, scheme, table string, create bool) (*sqlstore.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, sqlPingTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("cannot reach the database: %w", err)
	}
	dialect := sqlstore.SQLite
	switch scheme {
	case "postgres", "postgresql":
		dialect = sqlstore.PostgreSQL
	case "mysql":
		var version string
		if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return nil, err
		}
		dialect = mysqlDialect(version)
	}
	st, err := sqlstore.New(db, dialect, &sqlstore.Options{Table: table})
	if err != nil {
		return nil, err
	}
	if !create {
		return st, nil
	}
	if err := st.CreateTable(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// mysqlDialect picks MariaDB, whose INSERT … RETURNING (10.5) saves a
// statement per Claim, or MySQL, from the server's VERSION().
func mysqlDialect(version string) sqlstore.Dialect {
	if !strings.Contains(version, "MariaDB") {
		return sqlstore.MySQL
	}
	major, rest, _ := strings.Cut(version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || ma < 10 || ma == 10 && mi < 5 {
		return sqlstore.MySQL
	}
	return sqlstore.MariaDB
}

// cutTableParam removes the table parameter from rawURL's query and
// returns it. A MySQL DSN's query follows the last '/', as go-sql-driver
// reads it (the password may hold a '?'); a URL's follows the first '?'.
func cutTableParam(scheme, rawURL string) (dsn, table string, err error) {
	start := strings.Index(rawURL, "?")
	if scheme == "mysql" {
		slash := strings.LastIndex(rawURL, "/")
		start = strings.Index(rawURL[slash+1:], "?")
		if start >= 0 {
			start += slash + 1
		}
	}
	if start < 0 {
		return rawURL, "", nil
	}
	var kept []string
	for _, p := range strings.Split(rawURL[start+1:], "&") {
		name, value, _ := strings.Cut(p, "=")
		if name != "table" {
			kept = append(kept, p)
			continue
		}
		if table != "" {
			return "", "", errors.New("parameter table given more than once")
		}
		if table, err = url.QueryUnescape(value); err != nil {
			return "", "", fmt.Errorf("parameter table: %w", err)
		}
		if table == "" {
			return "", "", errors.New("parameter table is empty")
		}
	}
	dsn = rawURL[:start]
	if len(kept) > 0 {
		dsn += "?" + strings.Join(kept, "&")
	}
	return dsn, table, nil
}

// hasParam reports whether query ("a=1&b=2", unparsed) sets name.
func hasParam(query, name string) bool {
	for _, p := range strings.Split(query, "&") {
		if n, _, _ := strings.Cut(p, "="); n == name {
			return true
		}
	}
	return false
}
