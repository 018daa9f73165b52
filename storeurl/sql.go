package storeurl

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
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

// openSQL opens a postgres, mysql or sqlite URL; every parameter but table
// goes to the driver. With create, a missing table is created; without, a
// missing SQLite file is an error.
func openSQL(ctx context.Context, scheme, rawURL string, create bool) (*Opened, error) {
	shown := redactURL(rawURL)
	dsn, table, err := cutTableParam(scheme, rawURL)
	if err != nil {
		return nil, badURL(fmt.Errorf("%s: %w", shown, err))
	}
	db, addr, err := openDB(scheme, dsn, create)
	if err != nil {
		if ue := (*URLError)(nil); errors.As(err, &ue) {
			return nil, badURL(fmt.Errorf("%s: %w", shown, ue.Err))
		}
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	st, err := openSQLStore(ctx, db, scheme, table, create)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	name := cmp.Or(table, defaultTable)
	o := &Opened{Store: st, close: db.Close, Addr: addr, Records: orDefault("table "+name, table != "")}
	o.FindSuffix = func(ctx context.Context, suffix string, n int) ([]string, bool, error) {
		keys, err := findSuffix(ctx, db, scheme, name, suffix, n)
		return keys, true, err
	}
	return o, nil
}

const defaultTable = "idemgate_records"

// findSuffix lists up to n keys of table's records that end with suffix,
// in key order, with one query over the key_text column.
func findSuffix(ctx context.Context, db *sql.DB, scheme, table, suffix string, n int) ([]string, error) {
	quote := func(s string) string { return `"` + s + `"` }
	param := "?"
	switch scheme {
	case "mysql":
		quote = func(s string) string { return "`" + s + "`" }
	case "postgres", "postgresql":
		param = "$1"
	}
	ref := quote(table)
	if schema, name, ok := strings.Cut(table, "."); ok {
		ref = quote(schema) + "." + quote(name)
	}
	pattern := "%" + strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(suffix)
	q := fmt.Sprintf("SELECT key_text FROM %s WHERE key_text LIKE %s ESCAPE '!' ORDER BY key_text LIMIT %d", ref, param, n)
	rows, err := db.QueryContext(ctx, q, pattern)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// openDB returns a pool for dsn and the database's address without
// credentials. It does no I/O but look for a SQLite file, without create.
func openDB(scheme, dsn string, create bool) (*sql.DB, string, error) {
	switch scheme {
	case "postgres", "postgresql":
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, "", badURL(err)
		}
		addr := fmt.Sprintf("%s://%s/%s", scheme, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), cfg.Database)
		return stdlib.OpenDB(*cfg), addr, nil
	case "mysql":
		cfg, err := mysqlConfig(strings.TrimPrefix(dsn, "mysql://"))
		if err != nil {
			return nil, "", badURL(err)
		}
		addr := "mysql://" + cfg.Addr + "/" + cfg.DBName
		if cfg.Net != "tcp" {
			addr = "mysql://" + cfg.Net + "(" + cfg.Addr + ")/" + cfg.DBName
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, "", badURL(err)
		}
		return sql.OpenDB(c), addr, nil
	case "sqlite":
		path, query, _ := strings.Cut(strings.TrimPrefix(dsn, "sqlite://"), "?")
		if path == "" {
			return nil, "", badURL(errors.New("no database file (want sqlite:///path/to/file.db)"))
		}
		if !create {
			// SQLite would create it: a typo would read an empty database.
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return nil, "", fmt.Errorf("no database file %s (the service creates it; this opening does not)", path)
			} else if err != nil {
				return nil, "", err
			}
		}
		if !hasParam(query, "_pragma") {
			query = strings.TrimPrefix(query+"&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)", "&")
		}
		c, err := sqlite.NewConnector(path + "?" + query)
		if err != nil {
			return nil, "", badURL(err)
		}
		db := sql.OpenDB(c)
		// One writer at a time: callers queue in database/sql, not in
		// SQLite's busy handler.
		db.SetMaxOpenConns(1)
		return db, "sqlite://" + path, nil
	}
	return nil, "", fmt.Errorf("not a SQL scheme: %q", scheme)
}

// mysqlConfig reads a MySQL URL after its scheme, the driver's DSN
// (user:pass@tcp(host:port)/db?…) or the URL form (user:pass@host:port/db?…,
// port 3306 by default), interpolating parameters unless it says otherwise.
func mysqlConfig(dsn string) (*mysql.Config, error) {
	slash := strings.LastIndex(dsn, "/")
	if slash < 0 {
		return nil, errors.New("no database (want mysql://user:pass@host:port/db)")
	}
	authority, query := dsn[:slash], ""
	if _, q, ok := strings.Cut(dsn[slash+1:], "?"); ok {
		query = q
	}
	at := strings.LastIndex(authority, "@")
	hostPart := authority[at+1:]
	var cfg *mysql.Config
	if hostPart == "" || strings.HasSuffix(hostPart, ")") {
		// The driver's DSN: net(addr), or nothing for the default.
		var err error
		if cfg, err = mysql.ParseDSN(dsn); err != nil {
			return nil, err
		}
	} else {
		u, err := url.Parse("mysql://" + dsn)
		if err != nil {
			return nil, withoutURL(err)
		}
		// The driver parses the parameters; the user is set apart, as a
		// password may hold any character.
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "3306")
		}
		d := "tcp(" + addr + ")/" + strings.TrimPrefix(u.Path, "/")
		if u.RawQuery != "" {
			d += "?" + u.RawQuery
		}
		if cfg, err = mysql.ParseDSN(d); err != nil {
			return nil, err
		}
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if !hasParam(query, "interpolateParams") {
		cfg.InterpolateParams = true
	}
	return cfg, nil
}

// openSQLStore pings db, picks the dialect and, with create, makes sure
// the table exists.
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
		return nil, badURL(err) // the table parameter
	}
	if create {
		if err := st.CreateTable(ctx); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// mysqlDialect picks MariaDB from 10.5 (its INSERT … RETURNING saves a
// statement per Claim), else MySQL, from the server's VERSION().
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

// cutTableParam removes the table parameter from rawURL's query and returns
// it. A MySQL DSN's query follows the last '/' (a password may hold a '?').
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
		if err := misspelled([]string{name}, "table"); err != nil {
			return "", "", err
		}
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
