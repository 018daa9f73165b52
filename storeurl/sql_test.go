package storeurl

import (
	"crypto/rand"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// uniqueTable names a table no other test uses.
func uniqueTable() string { return "storeurl_" + strings.ToLower(rand.Text()[:12]) }

// withParam appends name=value to the query of rawURL.
func withParam(rawURL, name, value string) string {
	sep := "?"
	if strings.Contains(rawURL[strings.LastIndex(rawURL, "/")+1:], "?") {
		sep = "&"
	}
	return rawURL + sep + name + "=" + value
}

func TestOpenPostgres(t *testing.T) {
	dsn := postgresDSN(t)
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		t.Skipf("POSTGRES_DSN %q is not a URL", dsn)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	table := uniqueTable()
	dropAfter(t, stdlib.OpenDB(*cfg), table)
	openSQLURL(t, withParam(dsn, "table", table), "postgres")
	openSQLURL(t, withParam(strings.Replace(dsn, "postgres://", "postgresql://", 1), "table", table), "postgresql")
}

func TestOpenMySQL(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	table := uniqueTable()
	dropAfter(t, sql.OpenDB(c), table)
	openSQLURL(t, withParam("mysql://"+dsn, "table", table), "mysql")
	// The driver's own parameters still reach it.
	openSQLURL(t, withParam(withParam("mysql://"+dsn, "table", table), "interpolateParams", "false"), "mysql")
}

func TestOpenSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemgate.db")
	openSQLURL(t, "sqlite://"+path, "sqlite")
	openSQLURL(t, "sqlite://"+path+"?table=other&_pragma=busy_timeout(1000)", "sqlite")
}

func TestOpenSQLErrors(t *testing.T) {
	for _, u := range []string{
		"sqlite://",
		"sqlite://" + filepath.Join(t.TempDir(), "x.db") + "?table=bad;name",
		"sqlite://" + filepath.Join(t.TempDir(), "x.db") + "?table=a&table=b",
		"sqlite://" + filepath.Join(t.TempDir(), "x.db") + "?table=",
		"mysql://root:secret@tcp(127.0.0.1:1)/test?timeout=1s",
		"postgres://%zz",
	} {
		o, err := Open(t.Context(), u)
		if err == nil {
			o.Close()
			t.Errorf("Open(%q) succeeded, want an error", u)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error %q shows the password", u, err)
		}
	}
}

func TestCutTableParam(t *testing.T) {
	tests := []struct {
		scheme, in, dsn, table string
	}{
		{"postgres", "postgres://u@h/db", "postgres://u@h/db", ""},
		{"postgres", "postgres://u@h/db?table=t", "postgres://u@h/db", "t"},
		{"postgres", "postgres://u@h/db?sslmode=disable&table=app.t&x=y", "postgres://u@h/db?sslmode=disable&x=y", "app.t"},
		{"mysql", "mysql://u:p?w@tcp(h:3306)/db?table=t&loc=UTC", "mysql://u:p?w@tcp(h:3306)/db?loc=UTC", "t"},
		{"mysql", "mysql://u:p?w@tcp(h:3306)/db", "mysql://u:p?w@tcp(h:3306)/db", ""},
		{"sqlite", "sqlite:///var/x.db?_pragma=busy_timeout(9)&table=t", "sqlite:///var/x.db?_pragma=busy_timeout(9)", "t"},
		{"sqlite", "sqlite:///var/x.db?table=a%5Fb", "sqlite:///var/x.db", "a_b"},
	}
	for _, tt := range tests {
		dsn, table, err := cutTableParam(tt.scheme, tt.in)
		if err != nil || dsn != tt.dsn || table != tt.table {
			t.Errorf("cutTableParam(%q) = %q, %q, %v; want %q, %q", tt.in, dsn, table, err, tt.dsn, tt.table)
		}
	}
}

func TestMySQLDialect(t *testing.T) {
	got := map[string]sqlstore.Dialect{}
	for _, v := range []string{"8.0.36", "8.4.1-log", "10.4.33-MariaDB", "10.5.0-MariaDB", "10.11.19-MariaDB-0+deb12u1", "11.4.2-MariaDB-ubu2404", "5.5.5-10.6.0-MariaDB"} {
		got[v] = mysqlDialect(v)
	}
	want := map[string]sqlstore.Dialect{
		"8.0.36":                     sqlstore.MySQL,
		"8.4.1-log":                  sqlstore.MySQL,
		"10.4.33-MariaDB":            sqlstore.MySQL, // no INSERT … RETURNING before 10.5
		"10.5.0-MariaDB":             sqlstore.MariaDB,
		"10.11.19-MariaDB-0+deb12u1": sqlstore.MariaDB,
		"11.4.2-MariaDB-ubu2404":     sqlstore.MariaDB,
		"5.5.5-10.6.0-MariaDB":       sqlstore.MySQL, // an old replication prefix: unsure, so the portable dialect
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mysqlDialect (-want +got):\n%s", diff)
	}
}

// openSQLURL opens rawURL twice, runs a message through the first store and
// its duplicate through the second (so both found one table), and closes
// them.
func openSQLURL(t *testing.T, rawURL, wantName string) {
	t.Helper()
	ctx := t.Context()
	first, err := Open(ctx, rawURL)
	if err != nil {
		t.Fatalf("Open(%q): %v", rawURL, err)
	}
	defer first.Close()
	second, err := Open(ctx, rawURL)
	if err != nil {
		t.Fatalf("second Open(%q): %v", rawURL, err)
	}
	defer second.Close()
	if first.Name != wantName {
		t.Errorf("Name = %q, want %q", first.Name, wantName)
	}
	key := "storeurl-test-" + rand.Text()
	c, err := first.Store.Claim(ctx, key, time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim through %q = %v, %v; want Won", rawURL, c.Status, err)
	}
	if ok, err := first.Store.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete = %v, %v; want true", ok, err)
	}
	if d, err := second.Store.Claim(ctx, key, time.Minute, store.ClaimOptions{}); err != nil || d.Status != store.AlreadyDone {
		t.Fatalf("duplicate Claim through a second Open = %v, %v; want AlreadyDone", d.Status, err)
	}
}

// postgresDSN returns a PostgreSQL URL for t: $POSTGRES_DSN, the local
// default server, or a private one (this package has no TestMain to stop a
// shared one).
func postgresDSN(t *testing.T) string {
	t.Helper()
	if os.Getenv("POSTGRES_DSN") != "" || testenv.Listening("127.0.0.1:5432") {
		return testenv.PostgresDSN(t)
	}
	s := testenv.Private(t, "PostgreSQL", testenv.StartPostgres)
	return "postgres://postgres@" + s.Addr + "/test?sslmode=disable"
}

// dropAfter drops table through db when t ends, and closes db.
func dropAfter(t *testing.T, db *sql.DB, table string) {
	t.Cleanup(func() {
		if _, err := db.ExecContext(testenv.Context(t), "DROP TABLE IF EXISTS "+table); err != nil {
			t.Logf("dropping %s: %v", table, err)
		}
		db.Close()
	})
}
