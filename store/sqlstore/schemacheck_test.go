package sqlstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// handMadeTable is the DDL of a record table made by hand around a
// surrogate key: id is the primary key, and keyIndex (with %T for the
// table) is the only index on key_hash. The other columns and the index on
// expires_at are the store's, so nothing but the key is wrong.
func handMadeTable(d sqlstore.Dialect, keyIndex string) []string {
	var ddl string
	switch d {
	case sqlstore.PostgreSQL:
		ddl = `CREATE TABLE "%T" (
	id          bigserial PRIMARY KEY,
	key_hash    bytea    NOT NULL,
	key_text    text     NOT NULL,
	state       smallint NOT NULL,
	fence       bigint   NOT NULL,
	token       text     NOT NULL,
	lease_until bigint   NOT NULL,
	expires_at  bigint   NOT NULL,
	fingerprint bytea,
	origin      text,
	attempts    integer,
	reason      text,
	first_failure bigint
)`
	case sqlstore.SQLite:
		ddl = `CREATE TABLE "%T" (
	id          INTEGER PRIMARY KEY,
	key_hash    BLOB    NOT NULL,
	key_text    TEXT    NOT NULL,
	state       INTEGER NOT NULL,
	fence       INTEGER NOT NULL,
	token       TEXT    NOT NULL,
	lease_until INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	fingerprint BLOB,
	origin      TEXT,
	attempts    INTEGER,
	reason      TEXT,
	first_failure INTEGER
) STRICT`
	default:
		ddl = "CREATE TABLE `%T` (" + `
	id          BIGINT     NOT NULL AUTO_INCREMENT PRIMARY KEY,
	key_hash    BINARY(32) NOT NULL,
	key_text    MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
	state       TINYINT    NOT NULL,
	fence       BIGINT     NOT NULL,
	token       BLOB       NOT NULL,
	lease_until BIGINT     NOT NULL,
	expires_at  BIGINT     NOT NULL,
	fingerprint VARBINARY(32) NULL,
	origin      VARCHAR(128) NULL,
	attempts    INT NULL,
	reason      VARCHAR(256) NULL,
	first_failure BIGINT NULL
) ENGINE = InnoDB`
	}
	return []string{ddl, keyIndex, `CREATE INDEX %T_expires_at ON %T (expires_at)`}
}

// makeTable runs ddl, with %T standing for a fresh table name, and drops
// the table when t ends.
func makeTable(t *testing.T, b backend, ddl []string) (*sqlstore.Store, string) {
	t.Helper()
	db := b.open(t, 2)
	table := uniqueTable()
	t.Cleanup(func() {
		if _, err := db.Exec("DROP TABLE IF EXISTS " + table); err != nil {
			t.Logf("dropping %s: %v", table, err)
		}
	})
	for _, q := range ddl {
		if _, err := db.ExecContext(t.Context(), strings.ReplaceAll(q, "%T", table)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err := sqlstore.New(db, b.dialect, &sqlstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return s, table
}

// TestKeyNotUniqueRefused makes record tables whose key_hash is not unique
// in the way every Claim relies on (the primary key, or a unique index of
// that one column). TableExists, which `idemgate check` calls, and
// CreateTable must both refuse such a table, naming it and what it lacks:
// on it MariaDB lets every Claim of a key win, and PostgreSQL and SQLite
// fail every Claim.
func TestKeyNotUniqueRefused(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			keys := map[string]string{
				"plain index":            `CREATE INDEX %T_key ON %T (key_hash)`,
				"unique with another":    `CREATE UNIQUE INDEX %T_key ON %T (key_hash, id)`,
				"unique index elsewhere": `CREATE UNIQUE INDEX %T_key ON %T (key_text(20))`,
			}
			if b.dialect == sqlstore.PostgreSQL || b.dialect == sqlstore.SQLite {
				keys["partial unique"] = `CREATE UNIQUE INDEX %T_key ON %T (key_hash) WHERE state = 1`
				keys["unique index elsewhere"] = `CREATE UNIQUE INDEX %T_key ON %T (key_text)`
			} else {
				keys["unique prefix"] = `CREATE UNIQUE INDEX %T_key ON %T (key_hash(16))`
			}
			for name, keyIndex := range keys {
				t.Run(name, func(t *testing.T) {
					s, table := makeTable(t, b, handMadeTable(b.dialect, keyIndex))
					ok, err := s.TableExists(t.Context())
					if err == nil || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "key_hash") || !strings.Contains(err.Error(), "unique") {
						t.Errorf("TableExists = %v, %v; want an error naming %s, key_hash and its missing unique key", ok, err, table)
					}
					err = s.CreateTable(t.Context())
					if err == nil || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "key_hash") {
						t.Errorf("CreateTable = %v; want an error naming %s and key_hash", err, table)
					}
					t.Logf("CreateTable: %v", err)
				})
			}
		})
	}
}

// TestKeyUniqueIndexAccepted: a hand-made table whose key_hash is not the
// primary key but carries a unique index of that one column is a correct
// record table, and Claims on it decide as on the store's own.
func TestKeyUniqueIndexAccepted(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, table := makeTable(t, b, handMadeTable(b.dialect, `CREATE UNIQUE INDEX %T_key ON %T (key_hash)`))
			if ok, err := s.TableExists(t.Context()); !ok || err != nil {
				t.Fatalf("TableExists(%s) = %v, %v; want true", table, ok, err)
			}
			if err := s.CreateTable(t.Context()); err != nil {
				t.Fatalf("CreateTable(%s): %v", table, err)
			}
			c, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
			if err != nil || c.Status != store.Won {
				t.Fatalf("Claim = %v, %v; want Won", c.Status, err)
			}
			if c, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.HeldByOther {
				t.Fatalf("second Claim = %v, %v; want HeldByOther", c.Status, err)
			}
		})
	}
}

// TestMySQLIndexChecked: on MySQL and MariaDB too, a table without its
// index on expires_at is incomplete; CreateTable adds the index.
func TestMySQLIndexChecked(t *testing.T) {
	for _, b := range []backend{mariadbBackend, mysqlBackend} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ddl := handMadeTable(b.dialect, `CREATE UNIQUE INDEX %T_key ON %T (key_hash)`)[:2]
			s, table := makeTable(t, b, ddl)
			if ok, err := s.TableExists(t.Context()); ok || err != nil {
				t.Fatalf("TableExists(%s) without the index on expires_at = %v, %v; want false", table, ok, err)
			}
			if err := s.CreateTable(t.Context()); err != nil {
				t.Fatalf("CreateTable(%s): %v", table, err)
			}
			if ok, err := s.TableExists(t.Context()); !ok || err != nil {
				t.Fatalf("TableExists(%s) after CreateTable = %v, %v; want true", table, ok, err)
			}
		})
	}
}
