package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// offClock is a store clock off this machine's by a fixed skew.
type offClock time.Duration

func (d offClock) Now(context.Context) (time.Time, error) {
	return time.Now().Add(time.Duration(d)), nil
}

func TestCheckClockSkew(t *testing.T) {
	for _, tc := range []struct {
		skew, max time.Duration
		problem   bool
		want      string
	}{
		{0, 2 * time.Second, false, "ok    clock     the store's clock is "},
		{time.Minute, 2 * time.Second, true, "FAIL  clock     the store's clock is 1m0s ahead of this machine's"},
		{-time.Minute, 2 * time.Second, true, "1m0s behind this machine's"},
		{time.Minute, time.Hour, false, "ok    clock     the store's clock is 1m0s ahead of"},
	} {
		var out bytes.Buffer
		r := &report{c: &cli{stdout: &out}}
		if err := r.clock(t.Context(), offClock(tc.skew), tc.max); err != nil {
			t.Fatal(err)
		}
		if got := r.problems > 0; got != tc.problem || !strings.Contains(out.String(), tc.want) {
			t.Errorf("skew %v, -max-skew %v: problem = %v, output %q; want problem = %v and %q", tc.skew, tc.max, got, out.String(), tc.problem, tc.want)
		}
	}
}

// TestCheckKeyNotUnique: check fails a hand-made table whose key_hash is
// only indexed, not unique, with a line that names the table and what it
// lacks, and the other commands refuse it.
func TestCheckKeyNotUnique(t *testing.T) {
	for _, tc := range []struct {
		name, driver, dsn, url, id string
	}{
		{"PostgreSQL", "pgx", testenv.PostgresDSN(t), testenv.PostgresDSN(t), "id bigserial PRIMARY KEY"},
		{"MariaDB", "mysql", testenv.MySQLDSN(t), "mysql://" + testenv.MySQLDSN(t), "id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"},
		{"SQLite", "sqlite", filepath.Join(t.TempDir(), "records.db"), "", "id INTEGER PRIMARY KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := unique()
			url := withParam(tc.url, "table", table)
			if tc.driver == "sqlite" {
				url = "sqlite://" + tc.dsn + "?table=" + table
			}
			db, err := sql.Open(tc.driver, tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			defer db.Exec("DROP TABLE IF EXISTS " + table)
			for _, q := range []string{
				"CREATE TABLE " + table + " (" + tc.id + ", key_hash " + map[string]string{"pgx": "bytea", "mysql": "BINARY(32)", "sqlite": "BLOB"}[tc.driver] + " NOT NULL, " +
					"key_text TEXT NOT NULL, state SMALLINT NOT NULL, fence BIGINT NOT NULL, token TEXT NOT NULL, lease_until BIGINT NOT NULL, expires_at BIGINT NOT NULL, fingerprint " +
					map[string]string{"pgx": "bytea", "mysql": "VARBINARY(32)", "sqlite": "BLOB"}[tc.driver] + ")",
				"CREATE INDEX " + table + "_key ON " + table + " (key_hash)",
				"CREATE INDEX " + table + "_expires_at ON " + table + " (expires_at)",
			} {
				if _, err := db.ExecContext(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			r := idemgate(t, "", "check", "-store", url)
			if r.code != exitProblem || !strings.Contains(r.stdout, "FAIL  table") || !strings.Contains(r.stdout, table) || !strings.Contains(r.stdout, "key_hash") {
				t.Errorf("check of a table without a unique key_hash = %d:\n%s", r.code, r.stdout)
			}
			r = idemgate(t, "", "inspect", "-store", url, "k")
			if r.code != exitProblem {
				t.Errorf("inspect = %d, want 1", r.code)
			}
			r.oneErrorLine(t, "key_hash")
		})
	}
}

// stats is an outbox whose Stats are fixed.
type stats outbox.Stats

func (s stats) Stats(context.Context) (outbox.Stats, error) { return outbox.Stats(s), nil }

// check reports the outbox's backlog, oldest message and dead ones, and
// fails an old message or a dead one.
func TestCheckOutbox(t *testing.T) {
	for _, tc := range []struct {
		stats   outbox.Stats
		problem bool
		want    string
	}{
		{outbox.Stats{}, false, "ok    outbox    0 unsent, 0 dead"},
		{outbox.Stats{Unsent: 12, Oldest: 3200 * time.Millisecond}, false, "ok    outbox    12 unsent, the oldest waiting 3.2s, 0 dead"},
		{outbox.Stats{Unsent: 3, Oldest: time.Hour}, true, "FAIL  outbox    3 unsent, the oldest waiting 1h0m0s, 0 dead: a message has waited longer than -max-outbox-age 10m0s"},
		{outbox.Stats{Dead: 2}, true, "FAIL  outbox    0 unsent, 2 dead: list them with idemgate relay -dead"},
	} {
		var out bytes.Buffer
		r := &report{c: &cli{stdout: &out}}
		r.outbox(t.Context(), stats(tc.stats), 10*time.Minute)
		if got := r.problems > 0; got != tc.problem || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%+v: problem = %v, output %q; want problem = %v and %q", tc.stats, got, out.String(), tc.problem, tc.want)
		}
	}
}

// check reads a real outbox: a SQLite store's, with two unsent messages.
func TestCheckReadsOutbox(t *testing.T) {
	file := filepath.Join(t.TempDir(), "records.db")
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	st, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{Outbox: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := st.Claim(ctx, "order-1", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CompleteTx(ctx, tx, c, outbox.Message{Topic: "orders", Data: []byte("a")}, outbox.Message{Topic: "orders", Data: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r := idemgate(t, "", "check", "-store", "sqlite://"+file)
	if r.code != exitOK || !strings.Contains(r.stdout, "ok    outbox    2 unsent, the oldest waiting ") {
		t.Errorf("check = %d:\n%s", r.code, r.stdout)
	}
}

// check on every real store: FAILED keys past -max-failed and claims held
// past -max-held are problems, each reported with its threshold.
func TestCheckRecords(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url, _ := failedOnBackend(t, b)
			r := idemgate(t, "", "check", "-store", url)
			if r.code != exitProblem || !strings.Contains(r.stdout, `FAIL  failed    3 FAILED keys, more than -max-failed 0 (by reason: 2 "card declined", 1 `) ||
				!strings.Contains(r.stdout, "ok    held      no claim held or lapsed for longer than 10m0s") {
				t.Errorf("check with 3 FAILED keys = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			r = idemgate(t, "", "check", "-store", url, "-max-failed", "3", "-max-held", "1ns")
			if !strings.Contains(r.stdout, "ok    failed    3 FAILED keys") || !strings.Contains(r.stdout, "held or lapsed for longer than -max-held 1ns") ||
				!strings.Contains(r.stdout, "check the sink before a replay") || r.code != exitProblem {
				t.Errorf("check -max-failed 3 -max-held 1ns = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}
