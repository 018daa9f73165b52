package sqlstore_test

import (
	"context"
	"database/sql"
	"io"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestCompleteTxQuickstart runs ExampleStore_CompleteTx, the README's SQL
// quickstart, on every dialect the README names (MariaDB's server for both
// the MariaDB and the MySQL dialect), each in a schema or database of its
// own with its own payments table, and holds it to the output the Example
// documents.
func TestCompleteTxQuickstart(t *testing.T) {
	for _, b := range []backend{postgresBackend, mariadbBackend, mysqlBackend, sqliteBackend} {
		t.Run(b.name, func(t *testing.T) {
			db := paymentsDatabase(t, b)
			if _, err := db.ExecContext(testenv.Context(t), "CREATE TABLE payments (id VARCHAR(200) NOT NULL, cents INTEGER NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			s := b.store(t, db, nil)
			saved := openPayments
			t.Cleanup(func() { openPayments = saved })
			openPayments = func(context.Context) (*sqlstore.Store, func()) { return s, func() {} }

			const want = "<nil> 1 already_done <nil>\n" // ExampleStore_CompleteTx's Output
			if got := stdoutOf(t, ExampleStore_CompleteTx); got != want {
				t.Errorf("ExampleStore_CompleteTx on %s printed %q, want %q", b.name, got, want)
			}
		})
	}
}

// paymentsDatabase returns a pool on a database where the name payments
// is free: a new schema on PostgreSQL, a new database on MariaDB, a new
// file for SQLite; each is dropped when t ends.
func paymentsDatabase(t *testing.T, b backend) *sql.DB {
	t.Helper()
	ctx := testenv.Context(t)
	name := uniqueTable()
	switch b.dialect {
	case sqlstore.PostgreSQL:
		admin := b.open(t, 1)
		if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP SCHEMA "+name+" CASCADE") })
		cfg, err := pgx.ParseConfig(testenv.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["search_path"] = name
		return openDB(t, stdlib.GetConnector(*cfg), 4)
	case sqlstore.MariaDB, sqlstore.MySQL:
		admin := b.open(t, 1)
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP DATABASE "+name) })
		cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = name
		cfg.InterpolateParams = true
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return openDB(t, c, 4)
	}
	return b.open(t, 1) // SQLite: a file of t's own
}

// stdoutOf returns what f prints on os.Stdout.
func stdoutOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	read := make(chan string)
	go func() {
		out, _ := io.ReadAll(r)
		read <- string(out)
	}()
	func() {
		defer func() { os.Stdout = saved; w.Close() }()
		f()
	}()
	return <-read
}
