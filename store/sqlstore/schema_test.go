package sqlstore_test

import (
	"crypto/sha256"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestCreateTable checks that CreateTable works with a plain and a
// schema-qualified name, and that once the schema is in place it only looks
// (one statement, no DDL), so that a database user without DDL rights can
// call it.
func TestCreateTable(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, table := range []string{uniqueTable(), schemaOf(t, b) + "." + uniqueTable()} {
				spy := &spyConnector{Connector: b.connector(t)}
				db := openDB(t, spy, 1)
				s := newStore(t, db, b.dialect, &sqlstore.Options{Table: table})
				before := spy.stmts.Load()
				if err := s.CreateTable(t.Context()); err != nil {
					t.Fatalf("second CreateTable(%s): %v", table, err)
				}
				if n := spy.stmts.Load() - before; n != 1 {
					t.Errorf("CreateTable(%s) on an existing schema ran %d statements, want 1 (the lookup)", table, n)
				}
				c, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
				if err != nil || c.Status != store.Won {
					t.Fatalf("Claim on %s = %v, %v; want Won", table, c.Status, err)
				}
				if ok, err := s.Complete(t.Context(), c); !ok || err != nil {
					t.Fatalf("Complete on %s = %v, %v; want true", table, ok, err)
				}
			}
		})
	}
}

// schemaOf names a schema of b's test database that holds its tables.
func schemaOf(t *testing.T, b backend) string {
	switch b.dialect {
	case sqlstore.PostgreSQL:
		return "public"
	case sqlstore.SQLite:
		return "main"
	}
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.DBName
}

// TestRecordInstants reads the instants a record holds: whenever a Claim
// wins, expires_at is exactly lease_until + ttl (one reading of the
// database clock), LeaseUntil reports lease_until, the fence is the
// database clock of the win in microseconds (read to the millisecond), and
// Extend keeps expires_at at least a ttl past the new lease.
func TestRecordInstants(t *testing.T) {
	const ttl = time.Hour
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := b.open(t, 2)
			table := uniqueTable()
			s := newStore(t, db, b.dialect, &sqlstore.Options{Table: table, TTL: ttl})
			param := "?"
			if b.dialect == sqlstore.PostgreSQL {
				param = "$1"
			}
			read := func(key string) (fence, leaseUntil, expiresAt int64) {
				t.Helper()
				q := "SELECT fence, lease_until, expires_at FROM " + table + " WHERE key_text = " + param
				if err := db.QueryRowContext(ctx, q, key).Scan(&fence, &leaseUntil, &expiresAt); err != nil {
					t.Fatal(err)
				}
				return fence, leaseUntil, expiresAt
			}
			check := func(what string, c store.Claim) {
				t.Helper()
				fence, lease, exp := read(c.Key)
				if fence != c.Fence || lease != c.LeaseUntil.UnixMilli() || exp-lease != ttl.Milliseconds() {
					t.Errorf("%s: record fence %d, lease_until %d, expires_at %d; want fence %d, lease_until %d (the claim's), expires_at lease_until + %d",
						what, fence, lease, exp, c.Fence, c.LeaseUntil.UnixMilli(), ttl.Milliseconds())
				}
				// MySQL reads its clock once per expression; the others once.
				if won := lease - time.Minute.Milliseconds(); fence%1000 != 0 || fence/1000 > won || fence/1000 < won-50 {
					t.Errorf("%s: record fence %d, want the clock of the win (%d ms) times 1000", what, fence, won)
				}
			}

			c, err := s.Claim(ctx, "fresh", time.Minute, store.ClaimOptions{})
			if err != nil || c.Status != store.Won {
				t.Fatalf("Claim = %v, %v", c.Status, err)
			}
			check("fresh claim", c)

			if _, err := s.Claim(ctx, "taken", time.Millisecond, store.ClaimOptions{}); err != nil {
				t.Fatal(err)
			}
			var taken store.Claim
			for deadline := time.Now().Add(10 * time.Second); taken.Status != store.Won; {
				if time.Now().After(deadline) {
					t.Fatal("the 1ms lease never lapsed")
				}
				if taken, err = s.Claim(ctx, "taken", time.Minute, store.ClaimOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			check("takeover", taken)

			x, err := s.Extend(ctx, c, 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			fence, lease, exp := read("fresh")
			if fence != c.Fence || lease != x.LeaseUntil.UnixMilli() || exp-lease < ttl.Milliseconds() || !x.LeaseUntil.After(c.LeaseUntil) {
				t.Errorf("after Extend: fence %d, lease_until %d (Extend said %d, was %d), expires_at %d; want the new lease and expires_at at least a ttl later",
					fence, lease, x.LeaseUntil.UnixMilli(), c.LeaseUntil.UnixMilli(), exp)
			}
		})
	}
}

// TestRolloutCreateTable: the instances of a rollout start together, and
// each calls CreateTable on a table that does not exist yet. Every call
// must succeed: DDL that races another instance's is followed by another
// look, not reported. "fresh tables" races eight
// instances round after round. When an instance that found the table
// without its index builds it concurrently, the others must wait for that
// build as for a lock: in "index build held" the build lasts longer than
// the pauses between their tries (it waits for an open transaction, as
// concurrent builds do), and they must neither report the table locked
// meanwhile nor drop the build.
func TestRolloutCreateTable(t *testing.T) {
	const instances = 8
	t.Run("fresh tables", func(t *testing.T) {
		dbs := instancePools(t, instances)
		for round := range 12 {
			table := uniqueTable()
			t.Cleanup(func() { dbs[0].Exec("DROP TABLE IF EXISTS " + table) })
			results := rollout(t, dbs, table)
			for range instances {
				if r := <-results; r.err != nil {
					t.Errorf("round %d: instance %d's CreateTable failed after %v: %v", round, r.instance, r.took.Round(time.Millisecond), r.err)
				}
			}
		}
	})
	t.Run("index build held", func(t *testing.T) {
		ctx := t.Context()
		db := postgresBackend.open(t, 4)
		dbs := instancePools(t, instances)
		table := uniqueTable()
		t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table) })
		// The table as an instance's CREATE TABLE left it, before the index.
		first, err := sqlstore.New(db, sqlstore.PostgreSQL, &sqlstore.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if err := first.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `DROP INDEX `+table+`_expires_at`); err != nil {
			t.Fatal(err)
		}
		oid, endBuild := buildIndexHeld(t, db, table)

		results := rollout(t, dbs, table)
		left := instances
		for held := time.After(buildHeld); held != nil; {
			select {
			case r := <-results:
				left--
				t.Errorf("instance %d's CreateTable returned after %v while another session was still building the index: %v; want it to wait for the build", r.instance, r.took.Round(time.Millisecond), r.err)
			case <-held:
				held = nil
			}
		}
		endBuild()
		for ; left > 0; left-- {
			select {
			case r := <-results:
				if r.err != nil {
					t.Errorf("instance %d's CreateTable after the build ended: %v", r.instance, r.err)
				}
			case <-time.After(createBound):
				t.Fatalf("%d CreateTable calls still waiting %v after the build ended", left, createBound)
			}
		}
		if now, valid := expiresIndex(t, db, table); now != oid || !valid {
			t.Errorf("the index is %d (valid %v), want the other instance's build %d, valid: an instance dropped it and built its own", now, valid, oid)
		}
	})
}

// instancePools returns n pools on the PostgreSQL test database, one per
// instance of a rollout.
func instancePools(t *testing.T, n int) []*sql.DB {
	t.Helper()
	dbs := make([]*sql.DB, n)
	for i := range dbs {
		dbs[i] = postgresBackend.open(t, 2)
	}
	return dbs
}

// rolloutResult is how one instance's CreateTable ended.
type rolloutResult struct {
	instance int
	took     time.Duration
	err      error
}

// rollout starts, all at once, CreateTable on table in a store on each of
// dbs, and returns the channel that receives each call's result.
func rollout(t *testing.T, dbs []*sql.DB, table string) <-chan rolloutResult {
	t.Helper()
	results := make(chan rolloutResult, len(dbs))
	start := make(chan struct{})
	for i, db := range dbs {
		s, err := sqlstore.New(db, sqlstore.PostgreSQL, &sqlstore.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			<-start
			began := time.Now()
			err := s.CreateTable(t.Context())
			results <- rolloutResult{instance: i, took: time.Since(began), err: err}
		}()
	}
	close(start)
	return results
}

// oldSchema is the DDL of the store's table as earlier versions created
// it, with the table's name in place of %T: before it kept failures, and
// with the first version of its fingerprint and origin columns (0: before
// fingerprints, 1: before origins, 2: before failures).
func oldSchema(d sqlstore.Dialect, version int) []string {
	ddl := preFingerprintSchema(d)
	types := map[sqlstore.Dialect][2]string{
		sqlstore.PostgreSQL: {"bytea", "text"},
		sqlstore.SQLite:     {"BLOB", "TEXT"},
	}[d]
	if types[0] == "" {
		types = [2]string{"VARBINARY(32) NULL", "VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL"}
	}
	var cols string
	for i, name := range []string{"fingerprint", "origin"}[:version] {
		cols += ",\n\t" + name + " " + types[i]
	}
	ddl[0] = strings.Replace(ddl[0], "expires_at  BIGINT     NOT NULL,", "expires_at  BIGINT     NOT NULL"+cols+",", 1)
	ddl[0] = strings.Replace(ddl[0], "NOT NULL\n)", "NOT NULL"+cols+"\n)", 1)
	return ddl
}

// preFingerprintSchema is the DDL of the store's table before it kept
// fingerprints, as deployments created it: the table and its index, with
// the table's name in place of %T.
func preFingerprintSchema(d sqlstore.Dialect) []string {
	switch d {
	case sqlstore.PostgreSQL:
		return []string{`CREATE TABLE "%T" (
	key_hash    bytea    PRIMARY KEY,
	key_text    text     NOT NULL,
	state       smallint NOT NULL,
	fence       bigint   NOT NULL,
	token       text     NOT NULL,
	lease_until bigint   NOT NULL,
	expires_at  bigint   NOT NULL
)`, `CREATE INDEX "%T_expires_at" ON "%T" (expires_at)`}
	case sqlstore.SQLite:
		return []string{`CREATE TABLE "%T" (
	key_hash    BLOB    NOT NULL PRIMARY KEY,
	key_text    TEXT    NOT NULL,
	state       INTEGER NOT NULL,
	fence       INTEGER NOT NULL,
	token       TEXT    NOT NULL,
	lease_until INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID`, `CREATE INDEX "%T_expires_at" ON "%T" (expires_at)`}
	}
	return []string{"CREATE TABLE `%T` (" + `
	key_hash    BINARY(32) NOT NULL,
	key_text    MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
	state       TINYINT    NOT NULL,
	fence       BIGINT     NOT NULL,
	token       BLOB       NOT NULL,
	lease_until BIGINT     NOT NULL,
	expires_at  BIGINT     NOT NULL,
	PRIMARY KEY (key_hash),
	KEY ` + "`%T_expires_at`" + ` (expires_at)
) ENGINE = InnoDB`}
}

// TestUpgradeAddsColumns opens a store on a table created before the
// fingerprint column, or after it but before the origin column, or after
// that but before the failure columns, holding a completed record. Until
// CreateTable runs, Claim fails with an error that says what to do, naming
// the ALTER TABLE to run; CreateTable adds the columns, from several
// instances at once, and then only looks; the old record answers with no
// fingerprint and no origin, new claims keep theirs, and a claim can fail
// for good.
func TestUpgradeAddsColumns(t *testing.T) {
	for _, b := range backends {
		for version, name := range []string{"BeforeFingerprints", "BeforeOrigins", "BeforeFailures"} {
			missing := "ADD COLUMN " + []string{"fingerprint", "origin", "attempts"}[version]
			t.Run(b.name+"/"+name, func(t *testing.T) { upgradeAddsColumns(t, b, version, missing) })
		}
	}
}

func upgradeAddsColumns(t *testing.T, b backend, version int, missing string) {
	t.Parallel()
	ctx := t.Context()
	spy := &spyConnector{Connector: b.connector(t)}
	db := openDB(t, spy, 4)
	table := uniqueTable()
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table) })
	for _, ddl := range oldSchema(b.dialect, version) {
		if _, err := db.ExecContext(ctx, strings.ReplaceAll(ddl, "%T", table)); err != nil {
			t.Fatal(err)
		}
	}
	insert := `INSERT INTO ` + table + ` (key_hash, key_text, state, fence, token, lease_until, expires_at) VALUES ($1, 'old', 2, 1, 'x', 0, $2)`
	if b.dialect == sqlstore.MySQL || b.dialect == sqlstore.MariaDB {
		insert = strings.NewReplacer("$1", "?", "$2", "?").Replace(insert)
	}
	h := sha256.Sum256([]byte("old"))
	if _, err := db.ExecContext(ctx, insert, h[:], time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	stores := make([]*sqlstore.Store, 3)
	for i := range stores {
		s, err := sqlstore.New(db, b.dialect, &sqlstore.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	s := stores[0]
	fpA, fpB := []byte("payload-a"), []byte("payload-b")

	_, err := s.Claim(ctx, "new", time.Minute, store.ClaimOptions{Fingerprint: fpA})
	if err == nil || !strings.Contains(err.Error(), "CreateTable") || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "ADD COLUMN first_failure") {
		t.Fatalf("Claim on a table without some columns = %v; want an error naming CreateTable and the ALTER TABLE to run (%s, and ADD COLUMN first_failure)", err, missing)
	}
	t.Logf("Claim before CreateTable: %v", err)

	// Instances that start together all upgrade the table.
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.CreateTable(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("CreateTable %d on the old table: %v", i, err)
		}
	}
	before := spy.stmts.Load()
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if n := spy.stmts.Load() - before; n != 1 {
		t.Errorf("CreateTable on the upgraded table ran %d statements, want 1 (the lookup)", n)
	}

	old, err := s.Claim(ctx, "old", time.Minute, store.ClaimOptions{Fingerprint: fpB, Origin: "push/m-2"})
	if err != nil || old.Status != store.AlreadyDone || old.Fence != 1 || old.Fingerprint != nil || old.Origin != "" {
		t.Errorf("Claim of the record written before the upgrade = %+v, %v; want AlreadyDone at fence 1 with no fingerprint and no origin", old, err)
	}
	won, err := s.Claim(ctx, "new", time.Minute, store.ClaimOptions{Fingerprint: fpA, Origin: "push/m-1"})
	if err != nil || won.Status != store.Won || string(won.Fingerprint) != string(fpA) || won.Origin != "push/m-1" {
		t.Fatalf("Claim after the upgrade = %+v, %v; want Won with fingerprint %q and origin push/m-1", won, err, fpA)
	}
	held, err := s.Claim(ctx, "new", time.Minute, store.ClaimOptions{Fingerprint: fpB})
	if err != nil || held.Status != store.HeldByOther || string(held.Fingerprint) != string(fpA) || held.Origin != "push/m-1" {
		t.Errorf("second Claim after the upgrade = %+v, %v; want HeldByOther with the winner's fingerprint %q and origin", held, err, fpA)
	}
	if n, failed, err := s.Fail(ctx, won, store.Failure{Reason: "bad", Final: true}); n != 1 || !failed || err != nil {
		t.Fatalf("Fail after the upgrade = %d, %v, %v; want 1, true", n, failed, err)
	}
	dup, err := s.Claim(ctx, "new", time.Minute, store.ClaimOptions{})
	if err != nil || dup.Status != store.AlreadyFailed || dup.Attempts != 1 || dup.Reason != "bad" {
		t.Errorf("Claim of a FAILED record after the upgrade = %+v, %v; want AlreadyFailed, 1 attempt, reason bad", dup, err)
	}
}

// A table CreateTable never made is named in each verb's error, with what
// to do: call CreateTable.
func TestMissingTableNamesCreateTable(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			table := uniqueTable()
			s, err := sqlstore.New(openDB(t, b.connector(t), 1), b.dialect, &sqlstore.Options{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			want := "table " + table + " does not exist: call CreateTable"
			if _, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Claim on a missing table = %v; want %q", err, want)
			}
			if _, _, err := s.Inspect(t.Context(), "k"); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Inspect on a missing table = %v; want %q", err, want)
			}
			want = "table " + table + "_outbox does not exist: give Options.Outbox and call CreateTable"
			if _, err := s.Outbox().Stats(t.Context()); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "42P01") {
				t.Errorf("Outbox().Stats on a missing table = %v; want %q, and not the driver's words", err, want)
			}
		})
	}
}
