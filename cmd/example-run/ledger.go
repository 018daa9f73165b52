package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// ledgerTable is the business table of POST /ledger. It has no unique
// constraint on message_id: the transaction, not the schema, keeps one row
// per message.
const ledgerTable = "example_ledger"

// ledger writes one row per message and completes the message's claim in
// the same transaction, so that both commit or neither does.
type ledger struct {
	s      *sqlstore.Store
	insert string // message_id, amount, data
	log    *slog.Logger
}

// newLedger creates the ledger table in the store's database unless it
// exists. It returns nil, and does nothing, when st is not a SQL store.
func newLedger(ctx context.Context, st store.Store, log *slog.Logger) (*ledger, error) {
	s, ok := st.(*sqlstore.Store)
	if !ok {
		return nil, nil
	}
	l := &ledger{s: s, log: log, insert: "INSERT INTO " + ledgerTable + " (message_id, amount, data) VALUES (?, ?, ?)"}
	ddl := "CREATE TABLE IF NOT EXISTS " + ledgerTable + " (message_id TEXT NOT NULL, amount TEXT NOT NULL, data BLOB NOT NULL)"
	switch s.Dialect() {
	case sqlstore.PostgreSQL:
		l.insert = "INSERT INTO " + ledgerTable + " (message_id, amount, data) VALUES ($1, $2, $3)"
		ddl = "CREATE TABLE IF NOT EXISTS " + ledgerTable + " (message_id text NOT NULL, amount text NOT NULL, data bytea NOT NULL)"
	case sqlstore.MySQL, sqlstore.MariaDB:
		ddl = "CREATE TABLE IF NOT EXISTS " + ledgerTable + " (message_id TEXT NOT NULL, amount TEXT NOT NULL, data LONGBLOB NOT NULL) ENGINE = InnoDB"
	}
	// Instances that start together may race on the DDL (PostgreSQL can
	// fail the loser of two concurrent CREATE TABLE IF NOT EXISTS); the
	// next attempt finds the table.
	var err error
	for range 3 {
		if _, err = s.DB().ExecContext(ctx, ddl); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("create the /ledger table %s: %w", ledgerTable, err)
}

// record is the body of POST /ledger. It completes the claim first, which
// locks the record's row, so a delivery that lost its claim learns it
// before writing; then it writes the row, and commits both.
func (l *ledger) record(ctx context.Context, m *pushenvelope.Message) error {
	c, ok := gateway.ClaimFromContext(ctx)
	if !ok {
		return errors.New("ledger: no claim in the context")
	}
	tx, err := l.s.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := l.s.CompleteTx(ctx, tx, c); err != nil {
		return err // fenced out: the delivery that took the key over writes the row
	}
	data := m.Data
	if data == nil {
		data = []byte{}
	}
	if _, err := tx.ExecContext(ctx, l.insert, m.ID, m.Attributes["amount"], data); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	l.log.InfoContext(ctx, "ledger row written", slog.String("message_id", m.ID), slog.String("amount", m.Attributes["amount"]))
	return nil
}

// noLedger answers POST /ledger when the store is not SQL: 501, and an
// ERROR line, since every such delivery ends in the dead-letter topic.
func noLedger(log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, _ := pushenvelope.Decode(r, 0) // for the line only: the message id, when there is one
		attrs := []slog.Attr{slog.String("path", r.URL.Path)}
		if m != nil {
			attrs = append(attrs, slog.String("message_id", m.ID))
		}
		log.LogAttrs(r.Context(), slog.LevelError, "POST /ledger needs a SQL store; answered 501 (Pub/Sub retries, then dead-letters)", attrs...)
		http.Error(w, "POST /ledger needs a SQL store (IDEMGATE_STORE=postgres://…, mysql://… or sqlite://…)", http.StatusNotImplemented)
	}
}
