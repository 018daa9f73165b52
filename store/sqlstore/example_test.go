package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // driver "sqlite"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "idemgate-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// SQLite as the package documentation advises: WAL, a busy timeout and
	// one connection. With PostgreSQL, open "pgx" and pass
	// sqlstore.PostgreSQL; with MariaDB, "mysql" and sqlstore.MariaDB.
	db, err := sql.Open("sqlite", filepath.Join(dir, "idemgate.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	s, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{
		Table: "idemgate_records",
		TTL:   24 * time.Hour, // suppress duplicates for a day
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}

	c, err := s.Claim(ctx, "order-42", time.Minute, store.ClaimOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Status, c.Fence > 0) // the fence: the database's clock in microseconds
	// … run the side effect while holding the claim, then:
	done, err := s.Complete(ctx, c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done)

	dup, err := s.Claim(ctx, "order-42", time.Minute, store.ClaimOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(dup.Status, dup.Fence == c.Fence)
	// Output:
	// won true
	// true
	// already_done true
}

// Expired records stay in the table, behaving as absent, until a purge
// deletes them: run purgeEvery (below) in a goroutine of the service, or
// `idemgate purge` from a scheduled job. Here two completed orders expire
// after the store's ttl, and one purge deletes them.
func ExampleStore_PurgeExpired() {
	s, done := exampleStore(50 * time.Millisecond)
	defer done()
	ctx := context.Background()
	for _, key := range []string{"order-1", "order-2"} {
		c, err := s.Claim(ctx, key, time.Millisecond, store.ClaimOptions{})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := s.Complete(ctx, c); err != nil {
			log.Fatal(err)
		}
	}

	time.Sleep(100 * time.Millisecond) // the ttl passes on the database's clock
	n, err := s.PurgeExpired(ctx, 1000)
	fmt.Println(n, err)
	// Output: 2 <nil>
}

// exampleStore opens a store with the given ttl on a fresh SQLite file, as
// ExampleNew does, and returns it with its cleanup.
func exampleStore(ttl time.Duration) (*sqlstore.Store, func()) {
	dir, err := os.MkdirTemp("", "idemgate-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "idemgate.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	s, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{TTL: ttl})
	if err == nil {
		err = s.CreateTable(context.Background())
	}
	if err != nil {
		log.Fatal(err)
	}
	return s, func() { db.Close(); os.RemoveAll(dir) }
}

// purgeEvery deletes expired records every interval (a fraction of the
// ttl) for as long as ctx lives. Every instance may run one: concurrent
// purges are safe.
func purgeEvery(ctx context.Context, s *sqlstore.Store, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := s.PurgeExpired(ctx, 1000)
		if err != nil {
			log.Printf("idemgate purge: %v", err)
			continue
		}
		log.Printf("idemgate purge: %d expired records deleted", n)
	}
}

var _ = purgeEvery // shown by ExampleStore_PurgeExpired's documentation

// A body of the gateway's Lock that writes a payment and records its key
// done in one transaction, on the database of the store's table. A holder
// that stalled past its lease and lost the key to another delivery gets
// store.ErrFenced from CompleteTx, and its transaction rolls back: the
// payment is written once, however the deliveries race. The code is the
// same on every dialect but for the placeholder: TestCompleteTxQuickstart
// runs it on PostgreSQL and MariaDB too.
func ExampleStore_CompleteTx() {
	ctx := context.Background()
	s, closeDB := openPayments(ctx) // SQLite here
	defer closeDB()
	g, err := gateway.New(s, nil)
	if err != nil {
		log.Fatal(err)
	}

	insert := "INSERT INTO payments (id, cents) VALUES (?, 1250)" // MariaDB, MySQL, SQLite
	if s.Dialect() == sqlstore.PostgreSQL {
		insert = "INSERT INTO payments (id, cents) VALUES ($1, 1250)"
	}
	err = g.Lock(ctx, "payment-42", func(ctx context.Context) error {
		c, _ := gateway.ClaimFromContext(ctx)
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // unless Commit ran: neither the payment nor DONE
		if err := s.CompleteTx(ctx, tx, c); err != nil {
			return err // first: a holder that lost its key gets store.ErrFenced, writes nothing
		}
		if _, err := tx.ExecContext(ctx, insert, c.Key); err != nil {
			return err
		}
		return tx.Commit() // the payment and DONE commit together
	})

	var n int
	if err := s.DB().QueryRowContext(ctx, "SELECT count(*) FROM payments").Scan(&n); err != nil {
		log.Fatal(err)
	}
	dup, err2 := s.Claim(ctx, "payment-42", time.Minute, store.ClaimOptions{})
	fmt.Println(err, n, dup.Status, err2)
	// Output: <nil> 1 already_done <nil>
}

// openPayments returns a store whose database holds the application's
// payments table, and the function that closes it: ExampleStore_CompleteTx
// runs on a fresh SQLite file, TestCompleteTxQuickstart on each server.
var openPayments = func(ctx context.Context) (*sqlstore.Store, func()) {
	dir, err := os.MkdirTemp("", "idemgate-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE payments (id TEXT NOT NULL, cents INTEGER NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	s, err := sqlstore.New(db, sqlstore.SQLite, nil)
	if err == nil {
		err = s.CreateTable(ctx)
	}
	if err != nil {
		log.Fatal(err)
	}
	return s, func() { db.Close(); os.RemoveAll(dir) }
}

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
