package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// A pipeline stage: the body writes a ledger row and enqueues the next
// stage's message in one transaction with the record's DONE. The message
// commits if and only if the row does; a relay (package relay) publishes
// it afterwards with its child key, the same on every attempt.
func ExampleStore_CompleteTx_outbox() {
	ctx := context.Background()
	s, closeDB := openLedger(ctx) // SQLite here; built with Options{Outbox: true}
	defer closeDB()
	g, err := gateway.New(s, nil)
	if err != nil {
		log.Fatal(err)
	}

	insert := "INSERT INTO ledger (order_id) VALUES (?)" // MariaDB, MySQL, SQLite
	if s.Dialect() == sqlstore.PostgreSQL {
		insert = "INSERT INTO ledger (order_id) VALUES ($1)"
	}
	err = g.Lock(ctx, "order-42", func(ctx context.Context) error {
		c, _ := gateway.ClaimFromContext(ctx)
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // unless Commit ran: no row, no DONE, no message
		next := outbox.Message{Topic: "shipments", Data: []byte(`{"order":"42"}`)}
		if err := s.CompleteTx(ctx, tx, c, next); err != nil {
			return err // fenced out: nothing is written, nothing is published
		}
		if _, err := tx.ExecContext(ctx, insert, c.Key); err != nil {
			return err
		}
		return tx.Commit() // the row, DONE and the message commit together
	})

	msgs, _ := s.Outbox().Take(ctx, 10, time.Minute) // what a relay does
	fmt.Println(err, len(msgs), msgs[0].Topic, msgs[0].Attributes[outbox.ChildKeyAttribute] == outbox.ChildKey("order-42", "0"))
	// Output: <nil> 1 shipments true
}

// openLedger returns a store with an outbox whose database holds the
// application's ledger table, and the function that closes it.
func openLedger(ctx context.Context) (*sqlstore.Store, func()) {
	dir, err := os.MkdirTemp("", "idemgate-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE ledger (order_id TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	s, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{Outbox: true})
	if err == nil {
		err = s.CreateTable(ctx) // the records and the outbox
	}
	if err != nil {
		log.Fatal(err)
	}
	return s, func() { db.Close(); os.RemoveAll(dir) }
}
