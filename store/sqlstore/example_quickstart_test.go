package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the driver: github.com/jackc/pgx/v5/stdlib for PostgreSQL, github.com/go-sql-driver/mysql for MariaDB

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store/sqlstore"
)

func main() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "quickstart") // a scratch directory: use your database instead
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")) // sql.Open("pgx", dsn), sql.Open("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s, err := sqlstore.New(db, sqlstore.SQLite, nil) // sqlstore.PostgreSQL, sqlstore.MariaDB, sqlstore.MySQL
	if err != nil {
		log.Fatal(err)
	}
	if err := s.CreateTable(ctx); err != nil { // the records' table: once, when the service starts
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE payments (id TEXT NOT NULL, cents INTEGER NOT NULL)"); err != nil {
		log.Fatal(err) // your table, in the same database
	}
	g, err := gateway.New(s, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = g.Lock(ctx, "payment-42", func(ctx context.Context) error { return pay(ctx, s) })
	if err != nil {
		log.Fatal(err)
	}
	// A redelivery of the same message finds the key done: nothing runs.
	err = g.Lock(ctx, "payment-42", func(ctx context.Context) error { return pay(ctx, s) })
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM payments").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("redelivery: %v; payments: %d\n", err, n)
}

// pay writes the payment and records its key done in one transaction.
func pay(ctx context.Context, s *sqlstore.Store) error {
	c, _ := gateway.ClaimFromContext(ctx)
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // unless Commit ran: neither the payment nor DONE
	if err := s.CompleteTx(ctx, tx, c); err != nil {
		return err // first: a holder that lost its key gets store.ErrFenced, writes nothing
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO payments (id, cents) VALUES (?, 1250)", c.Key); err != nil {
		return err // PostgreSQL's placeholder is $1
	}
	return tx.Commit() // the payment and DONE commit together
}

// This file is the whole of a service's main package, on SQLite, which
// needs no server; TestCompleteTxQuickstart runs the same transaction on
// every dialect.
func Example() {
	main()
	// Output: redelivery: gateway: duplicate: the work for this key is already done; payments: 1
}
