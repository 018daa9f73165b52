package sqlstore_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

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

// TestLongFingerprintRejectedWithoutIO checks that a fingerprint longer than
// store.MaxFingerprintLen is refused before the store reaches the database
// (db0 fails any connection).
func TestLongFingerprintRejectedWithoutIO(t *testing.T) {
	for _, d := range []sqlstore.Dialect{sqlstore.PostgreSQL, sqlstore.MySQL, sqlstore.MariaDB, sqlstore.SQLite} {
		s, err := sqlstore.New(db0, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: make([]byte, store.MaxFingerprintLen+1)}
		if _, err := s.Claim(ctx, "k", time.Minute, opts); !errors.Is(err, store.ErrInvalidFingerprint) {
			t.Errorf("%v: Claim with a %d-byte fingerprint = %v, want store.ErrInvalidFingerprint", d, store.MaxFingerprintLen+1, err)
		}
	}
}
