package main

import (
	"crypto/rand"
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql" // driver "mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // driver "sqlite"

	"github.com/idemgate/idemgate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestExampleRunLedger(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "example.db")
		base := start(t, map[string]string{"IDEMGATE_STORE": "sqlite://" + path})
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		checkLedger(t, base, db, "?")
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
		t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table) })
		base := start(t, map[string]string{"IDEMGATE_STORE": withTable(dsn, table)})
		checkLedger(t, base, db, "$1")
	})
	t.Run("MariaDB", func(t *testing.T) {
		dsn := testenv.MySQLDSN(t)
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		table := "igt_" + strings.ToLower(rand.Text()[:16])
		t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table) })
		base := start(t, map[string]string{"IDEMGATE_STORE": withTable("mysql://"+dsn, table)})
		checkLedger(t, base, db, "?")
	})
}

// withTable adds the store URL parameter table to rawURL.
func withTable(rawURL, table string) string {
	if strings.Contains(rawURL, "?") {
		return rawURL + "&table=" + table
	}
	return rawURL + "?table=" + table
}

// checkLedger delivers one message to /ledger twice and expects one row.
// The test database may be shared, so the message id is unique and its
// rows are deleted afterwards.
func checkLedger(t *testing.T, base string, db *sql.DB, placeholder string) {
	t.Helper()
	id := "ledger-" + rand.Text()
	t.Cleanup(func() { db.Exec("DELETE FROM example_ledger WHERE message_id = "+placeholder, id) })
	body := pushBody(id, map[string]string{"amount": "12.50"})
	if code := post(t, base+"/ledger", body); code != http.StatusOK {
		t.Fatalf("POST /ledger = %d, want 200", code)
	}
	if code := post(t, base+"/ledger", body); code != http.StatusNoContent {
		t.Fatalf("redelivery to /ledger = %d, want 204", code)
	}
	rows, err := db.Query("SELECT amount, data FROM example_ledger WHERE message_id = "+placeholder, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var amount string
		var data []byte
		if err := rows.Scan(&amount, &data); err != nil {
			t.Fatal(err)
		}
		got = append(got, amount+" "+string(data))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := `12.50 {"order":1}`; len(got) != 1 || got[0] != want {
		t.Fatalf("ledger rows of message %s: %q, want one: %q", id, got, want)
	}
}

func TestExampleRunLedgerNeedsSQL(t *testing.T) {
	base := start(t, map[string]string{"IDEMGATE_STORE": "memory://"})
	if code := post(t, base+"/ledger", pushBody("1", nil)); code != http.StatusNotImplemented {
		t.Fatalf("POST /ledger on memory:// = %d, want 501", code)
	}
}
