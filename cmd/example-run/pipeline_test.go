package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestExampleRunPipeline: POST /pipeline/orders books an order once, and
// its shipment is in the outbox, with the child key of the order's claim,
// exactly when its row is; a rejected order leaves neither. POST
// /pipeline/shipments runs a shipment once per child key.
func TestExampleRunPipeline(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "example.db")
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		checkPipeline(t, db, sqlstore.SQLite, map[string]string{"IDEMGATE_STORE": "sqlite://" + path})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		dsn := testenv.PostgresDSN(t)
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		db := stdlib.OpenDB(*cfg)
		t.Cleanup(func() { db.Close() })
		table := "igt_" + strings.ToLower(rand.Text()[:16])
		checkPipeline(t, db, sqlstore.PostgreSQL, map[string]string{"IDEMGATE_STORE": withTable(dsn, table)})
	})
}

func checkPipeline(t *testing.T, db *sql.DB, d sqlstore.Dialect, env map[string]string) {
	sup := &supplier{hits: map[string]int{}}
	ss := httptest.NewServer(sup)
	t.Cleanup(ss.Close)
	table := "igt_" + strings.ToLower(rand.Text()[:16])
	t.Cleanup(func() {
		for _, suffix := range []string{"", "_outbox", "_orders"} {
			db.Exec("DROP TABLE IF EXISTS " + table + suffix)
		}
	})
	env["IDEMGATE_PIPELINE_TABLE"] = table
	env["SUPPLIER_URL"] = ss.URL
	base := start(t, env)

	// An order, delivered twice and republished: one row, one shipment.
	for i, id := range []string{"m1", "m1", "m2"} {
		want := http.StatusOK
		if i > 0 {
			want = http.StatusNoContent
		}
		if code := post(t, base+"/pipeline/orders", pushBody(id, map[string]string{"order_id": "o1", "amount": "3"})); code != want {
			t.Fatalf("delivery %d of order o1 = %d, want %d", i, code, want)
		}
	}
	// A rejected order: acknowledged, with no row and no shipment.
	if code := post(t, base+"/pipeline/orders", pushBody("m3", map[string]string{"order_id": "o2", "amount": "0"})); code != http.StatusOK {
		t.Fatalf("rejected order = %d, want 200", code)
	}
	var rows int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table + "_orders").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("order rows = %d, want 1 (o1 once, o2 rolled back)", rows)
	}
	st, err := sqlstore.New(db, d, &sqlstore.Options{Table: table, Outbox: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ps, err := st.Outbox().Take(ctx, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := outbox.ChildKey("pipeline:order_id:o1", "shipment")
	if len(ps) != 1 || ps[0].ChildKey != want || ps[0].Topic != "shipments" || ps[0].Attributes["order_id"] != "o1" {
		t.Fatalf("outbox = %+v, want one shipment of o1 to shipments with child key %s", ps, want)
	}

	// The shipment, published twice by a relay (two messageIds, one child
	// key): one supplier call.
	for i, id := range []string{"s1", "s2"} {
		if code := post(t, base+"/pipeline/shipments", pushBody(id, ps[0].Attributes)); code != http.StatusOK && code != http.StatusNoContent {
			t.Fatalf("shipment delivery %d = %d", i, code)
		}
	}
	if got := sup.count("shipment:" + want); got != 1 {
		t.Errorf("supplier calls for the shipment = %d, want 1", got)
	}
}
