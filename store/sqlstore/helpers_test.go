package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store/sqlstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// backend is a real database server and the dialect the store speaks to it.
type backend struct {
	name    string
	dialect sqlstore.Dialect
	// connector returns a new connector to the backend's test database.
	// For SQLite that is a new database file, private to t.
	connector func(t testing.TB) driver.Connector
	// noWrite starts PostgreSQL stores on the Claim that writes only when
	// it wins, which they otherwise take only above READ COMMITTED.
	noWrite bool
	// pgxTx runs the conformance suite's transactions through pgx's own
	// API rather than database/sql.
	pgxTx bool
}

// The MySQL dialect runs on the MariaDB server: it is written for both.
var (
	postgresBackend = backend{name: "PostgreSQL", dialect: sqlstore.PostgreSQL, connector: postgresConnector}
	mariadbBackend  = backend{name: "MariaDB", dialect: sqlstore.MariaDB, connector: mysqlConnector("interpolateParams=true")}
	mysqlBackend    = backend{name: "MySQL", dialect: sqlstore.MySQL, connector: mysqlConnector("interpolateParams=true")}
	sqliteBackend   = backend{name: "SQLite", dialect: sqlstore.SQLite, connector: sqliteConnector}
	// pgNoWriteBackend runs pgClaimNoWrite under READ COMMITTED.
	pgNoWriteBackend = backend{name: "PostgreSQL-nowrite", dialect: sqlstore.PostgreSQL, connector: postgresConnector, noWrite: true}
)

// backends are the configurations that every test runs on.
var backends = []backend{postgresBackend, mariadbBackend, mysqlBackend, sqliteBackend}

// open returns a pool of at most conns connections, closed when t ends.
func (b backend) open(t testing.TB, conns int) *sql.DB {
	t.Helper()
	return openDB(t, b.connector(t), conns)
}

// store returns a store of the backend on a fresh table of db (see
// newStore).
func (b backend) store(t testing.TB, db *sql.DB, opts *sqlstore.Options) *sqlstore.Store {
	t.Helper()
	s := newStore(t, db, b.dialect, opts)
	if b.noWrite {
		sqlstore.ClaimWithoutWriting(s)
	}
	return s
}

func openDB(t testing.TB, c driver.Connector, conns int) *sql.DB {
	t.Helper()
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(testenv.Context(t)); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return db
}

func postgresConnector(t testing.TB) driver.Connector {
	t.Helper()
	cfg, err := pgx.ParseConfig(testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return stdlib.GetConnector(*cfg)
}

// pgxPool returns a pgx pool on the PostgreSQL test database, closed when
// t ends.
func pgxPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(testenv.Context(t), testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func mysqlConnector(params string) func(t testing.TB) driver.Connector {
	return func(t testing.TB) driver.Connector {
		t.Helper()
		dsn := testenv.MySQLDSN(t)
		if params != "" {
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			dsn += sep + params
		}
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// sqliteDSN is how the package documentation tells users to open SQLite.
const sqliteDSN = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"

func sqliteConnector(t testing.TB) driver.Connector {
	t.Helper()
	c, err := sqlite.NewConnector(filepath.Join(t.TempDir(), "idemgate.db") + sqliteDSN)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// uniqueTable returns a table name no other test uses.
func uniqueTable() string {
	return "igt_" + strings.ToLower(rand.Text()[:16])
}

// newStore returns a store on a fresh table of db, created with
// CreateTable and dropped when t ends. A nil opts means a fresh table and
// the defaults; an empty opts.Table is filled in.
func newStore(t testing.TB, db *sql.DB, d sqlstore.Dialect, opts *sqlstore.Options) *sqlstore.Store {
	t.Helper()
	var o sqlstore.Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = uniqueTable()
	}
	s, err := sqlstore.New(db, d, &o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.ExecContext(testenv.Context(t), "DROP TABLE IF EXISTS "+o.Table); err != nil {
			t.Logf("dropping %s: %v", o.Table, err)
		}
	})
	return s
}

// db0 is a *sql.DB for tests that must not reach a database: New does no
// I/O, and neither do the checks that fail before a statement.
var db0 = sql.OpenDB(unusedConnector{})

type unusedConnector struct{}

func (unusedConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("this test must not connect")
}

func (unusedConnector) Driver() driver.Driver { return nil }
