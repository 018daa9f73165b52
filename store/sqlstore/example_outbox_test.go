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
	dir, err := os.MkdirTemp("", "idemgate-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE ledger (order_id TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	s, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{Outbox: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.CreateTable(ctx); err != nil { // the records and the outbox
		log.Fatal(err)
	}
	g, err := gateway.New(s, nil)
	if err != nil {
		log.Fatal(err)
	}

	var childKey string
	err = g.Lock(ctx, "order-42", func(ctx context.Context) error {
		c, _ := gateway.ClaimFromContext(ctx)
		childKey, _ = gateway.ChildKey(ctx, "0") // the first message's, on every attempt
		return withTx(ctx, db, func(tx *sql.Tx) error {
			next := outbox.Message{Topic: "shipments", Data: []byte(`{"order":"42"}`)}
			if err := s.CompleteTx(ctx, tx, c, next); err != nil {
				return err // fenced out: nothing is written, nothing is published
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO ledger (order_id) VALUES (?)", c.Key)
			return err
		}) // the ledger row, DONE and the message commit together, or none does
	})

	msgs, _ := s.Outbox().Take(ctx, 10, time.Minute) // what a relay does
	fmt.Println(err, len(msgs), msgs[0].Topic, msgs[0].Attributes[outbox.ChildKeyAttribute] == childKey)
	// Output: <nil> 1 shipments true
}
