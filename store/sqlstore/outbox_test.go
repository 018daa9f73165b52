package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/relay/relaytest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// pubsubClient returns a client on the Pub/Sub emulator, in a project of
// t's own, closed when t ends.
func pubsubClient(t testing.TB) *pubsub.Client {
	t.Helper()
	host := testenv.PubSubEmulatorHost(t)
	c, err := pubsub.NewClient(t.Context(), testenv.PubSubProject(t), testenv.PubSubClientOptions(host)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// outboxStore returns a store with an outbox on a fresh table of db; both
// tables are dropped when t ends.
func outboxStore(t testing.TB, db *sql.DB, d sqlstore.Dialect) *sqlstore.Store {
	t.Helper()
	table := uniqueTable()
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table+"_outbox"); err != nil {
			t.Logf("dropping %s_outbox: %v", table, err)
		}
	})
	return newStore(t, db, d, &sqlstore.Options{Table: table, TTL: time.Hour, Outbox: true})
}

// inOutboxTx runs relaytest's transactions on db with CompleteTx.
func inOutboxTx(db *sql.DB) func(ctx context.Context, st store.Store, fn func(complete relaytest.CompleteFunc) error) error {
	return func(ctx context.Context, st store.Store, fn func(complete relaytest.CompleteFunc) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		err = fn(func(c store.Claim, msgs ...outbox.Message) error {
			return st.(*sqlstore.Store).CompleteTx(ctx, tx, c, msgs...)
		})
		if err != nil {
			return errors.Join(err, tx.Rollback())
		}
		return tx.Commit()
	}
}

func TestOutbox(t *testing.T) {
	ps := pubsubClient(t)
	more := []backend{{name: "PostgreSQL-pgxtx", dialect: sqlstore.PostgreSQL, connector: postgresConnector, pgxTx: true}}
	for _, b := range append(backends, more...) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conns := 8
			if b.dialect == sqlstore.SQLite {
				conns = 1 // as the package documentation advises
			}
			var (
				db   *sql.DB
				inTx = inOutboxTx(nil)
			)
			if b.pgxTx {
				pool := pgxPool(t)
				db = stdlib.OpenDBFromPool(pool)
				t.Cleanup(func() { db.Close() })
				inTx = func(ctx context.Context, st store.Store, fn func(complete relaytest.CompleteFunc) error) error {
					tx, err := pool.Begin(ctx)
					if err != nil {
						return err
					}
					err = fn(func(c store.Claim, msgs ...outbox.Message) error {
						return st.(*sqlstore.Store).CompletePgxTx(ctx, tx, c, msgs...)
					})
					if err != nil {
						return errors.Join(err, tx.Rollback(ctx))
					}
					return tx.Commit(ctx)
				}
			} else {
				db = b.open(t, conns)
				inTx = inOutboxTx(db)
			}
			relaytest.Run(t, relaytest.Config{
				New: func(t testing.TB) (store.Store, relay.Source) {
					st := outboxStore(t, db, b.dialect)
					return st, st.Outbox()
				},
				InTx:   inTx,
				PubSub: ps,
				Wakes:  b.dialect == sqlstore.PostgreSQL,
			})
		})
	}
}

// CreateTable creates the outbox with Options.Outbox, TableExists checks
// it, and a store without the option refuses messages before it sends
// anything.
func TestOutboxSchema(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := b.open(t, 2)
			st := outboxStore(t, db, b.dialect)
			if ok, err := st.TableExists(ctx); err != nil || !ok {
				t.Fatalf("TableExists after CreateTable = %v, %v; want true", ok, err)
			}
			table := strings.TrimSuffix(sqlstore.OutboxTable(st), "_outbox")
			if _, err := db.ExecContext(ctx, "DROP TABLE "+table+"_outbox"); err != nil {
				t.Fatal(err)
			}
			if ok, err := st.TableExists(ctx); err != nil || ok {
				t.Fatalf("TableExists without the outbox table = %v, %v; want false", ok, err)
			}
			if err := st.CreateTable(ctx); err != nil {
				t.Fatal(err)
			}
			if ok, err := st.TableExists(ctx); err != nil || !ok {
				t.Fatalf("TableExists after CreateTable made the outbox again = %v, %v; want true", ok, err)
			}

			plain, err := sqlstore.New(db, b.dialect, &sqlstore.Options{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := plain.TableExists(ctx); err != nil || !ok {
				t.Fatalf("a store without Options.Outbox needs no outbox: TableExists = %v, %v", ok, err)
			}
			c, err := plain.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := plain.CompleteTx(ctx, tx, c, outbox.Message{Topic: "orders"}); err == nil || !strings.Contains(err.Error(), "Options.Outbox") {
				t.Errorf("CompleteTx with messages on a store without Options.Outbox = %v, want an error naming the option", err)
			}
		})
	}
}

// An outbox table made before the columns of failures and dead messages
// is reported, by TableExists and CreateTable, with the DDL that mends
// it; that DDL does.
func TestOutboxSchemaWithoutDeadColumns(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := b.open(t, 2)
			st := outboxStore(t, db, b.dialect)
			ob := sqlstore.OutboxTable(st)
			for _, col := range []string{"attempts", "reason", "died_at"} {
				if _, err := db.ExecContext(ctx, "ALTER TABLE "+ob+" DROP COLUMN "+col); err != nil {
					t.Fatal(err)
				}
			}
			_, err := st.TableExists(ctx)
			if err == nil || !strings.Contains(err.Error(), "died_at") || !strings.Contains(err.Error(), "ALTER TABLE") {
				t.Fatalf("TableExists on an outbox without the dead columns = %v; want an error naming them and the DDL that adds them", err)
			}
			if err := st.CreateTable(ctx); err == nil || !strings.Contains(err.Error(), "died_at") {
				t.Fatalf("CreateTable on an outbox without the dead columns = %v; want the same error", err)
			}
			for _, ddl := range sqlstore.OutboxAddColumns(st) {
				if _, err := db.ExecContext(ctx, ddl); err != nil {
					t.Fatalf("the advised DDL %q: %v", ddl, err)
				}
			}
			if ok, err := st.TableExists(ctx); err != nil || !ok {
				t.Fatalf("TableExists after the advised DDL = %v, %v; want true", ok, err)
			}
		})
	}
}

// The outbox is what a relay publishes from, and keeps what it gives up.
var (
	_ relay.Source      = (*sqlstore.Outbox)(nil)
	_ relay.Waker       = (*sqlstore.Outbox)(nil)
	_ relay.DeadLetters = (*sqlstore.Outbox)(nil)
)
