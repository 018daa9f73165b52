package storeurl

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
)

// TestClose: Close releases what Open opened, so the store fails after it,
// and is a no-op for a store that holds nothing to release.
func TestClose(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		o, err := Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "c.db"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Store.Claim(t.Context(), "before", time.Minute, store.ClaimOptions{}); err != nil {
			t.Fatalf("Claim before Close: %v", err)
		}
		if err := o.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := o.Store.Claim(t.Context(), "after", time.Minute, store.ClaimOptions{}); err == nil {
			t.Error("Claim after Close succeeded: Close must close the connection Open made")
		}
	})
	t.Run("memory", func(t *testing.T) {
		o, err := Open(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := o.Close(); err != nil {
				t.Errorf("Close #%d of memory:// = %v, want nil", i+1, err)
			}
		}
	})
}

// done claims and completes each key on o's store.
func done(t *testing.T, o *Opened, keys ...string) {
	t.Helper()
	for _, k := range keys {
		c, err := o.Store.Claim(t.Context(), k, time.Minute, store.ClaimOptions{})
		if err != nil || c.Status != store.Won {
			t.Fatalf("Claim(%q) = %v, %v", k, c.Status, err)
		}
		if ok, err := o.Store.Complete(t.Context(), c); !ok || err != nil {
			t.Fatalf("Complete(%q) = %v, %v", k, ok, err)
		}
	}
}

// TestWhere: Opened names the store without credentials, and the table or
// prefix, marked when it is the default.
func TestWhere(t *testing.T) {
	mysqlDSN := testenv.MySQLDSN(t)
	for _, tc := range []struct{ name, url, want string }{
		{"PostgreSQL", withParam(strings.Replace(postgresDSN(t), "postgres@", "postgres:s3cret@", 1), "table", "where_pg"), "table where_pg of postgres://"},
		{"MySQL DSN", "mysql://" + mysqlDSN, "table idemgate_records (default) of mysql://127.0.0.1:3306/test"},
		{"MySQL URL", "mysql://" + strings.Replace(strings.Replace(mysqlDSN, "tcp(", "", 1), ")/", "/", 1), "table idemgate_records (default) of mysql://127.0.0.1:3306/test"},
		{"SQLite", "sqlite://" + filepath.Join(t.TempDir(), "w.db") + "?table=w", "table w of sqlite:///"},
		{"Redis", "redis://" + whereRedis(t) + "/0", `key prefix "idemgate:" (default) of redis://` + whereRedis(t) + "/0"},
		{"Redis prefix", "redis://" + whereRedis(t) + "?prefix=p:", `key prefix "p:" of redis://` + whereRedis(t) + "/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.url, "s3cret") && !strings.Contains(tc.url, "127.0.0.1:5432") {
				t.Skip("a private PostgreSQL takes no password") // trust auth only on the shared one
			}
			o, err := Open(t.Context(), tc.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.url, err)
			}
			defer o.Close()
			if w := o.Where(); !strings.Contains(w, tc.want) || strings.Contains(w, "@") || strings.Contains(w, "s3cret") {
				t.Errorf("Where() = %q, want %q and no credentials", w, tc.want)
			}
		})
	}
}

// TestFindSuffix: the search matches the suffix as written, not as a LIKE
// or glob pattern, and only records of the opened table or prefix.
func TestFindSuffix(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"PostgreSQL", withParam(postgresDSN(t), "table", uniqueTable())},
		{"MariaDB", withParam("mysql://"+testenv.MySQLDSN(t), "table", uniqueTable())},
		{"SQLite", "sqlite://" + filepath.Join(t.TempDir(), "f.db")},
		{"Redis", "redis://" + whereRedis(t) + "/0?prefix=" + uniqueTable() + ":"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Open(t.Context(), tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			done(t, o, "msg:a_1", "msg:ab1", "x%1", "y*1", "z?1", "no")
			for suffix, want := range map[string][]string{
				"_1": {"msg:a_1"},
				"%1": {"x%1"},
				"*1": {"y*1"},
				"?1": {"z?1"},
				"1":  {"msg:a_1", "msg:ab1", "x%1", "y*1", "z?1"},
			} {
				got, complete, err := o.FindSuffix(t.Context(), suffix, 10)
				if err != nil || !complete || !slices.Equal(got, want) {
					t.Errorf("FindSuffix(%q) = %q, %v, %v; want %q, complete", suffix, got, complete, err, want)
				}
			}
			if got, _, err := o.FindSuffix(t.Context(), "1", 2); err != nil || len(got) != 2 {
				t.Errorf("FindSuffix(\"1\", 2) = %q, %v; want 2 keys", got, err)
			}
		})
	}
}

// TestOpenExistingSQLiteMissing: an operator's typo in the path is an
// error, and creates no file.
func TestOpenExistingSQLiteMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	if _, err := OpenExisting(t.Context(), "sqlite://"+path); err == nil || !strings.Contains(err.Error(), "no database file") {
		t.Errorf("OpenExisting of a missing file = %v, want an error", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenExisting created %s: %v", path, err)
	}
	if _, err := OpenExisting(t.Context(), "memory://"); !errors.As(err, new(*URLError)) {
		t.Errorf("OpenExisting(memory://) = %v, want a URLError", err)
	}
}

// whereRedis returns a Redis server for t, as the external tests'
// redisAddr does.
func whereRedis(t *testing.T) string {
	t.Helper()
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	if testenv.Listening("127.0.0.1:6379") {
		return "127.0.0.1:6379"
	}
	return testenv.Private(t, "redis", testenv.StartRedis).Addr
}

// A parameter two edits from one of the store's own is a usage error
// that names the one meant, before any I/O; a driver's own passes.
func TestMisspelledParameter(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"postgres://127.0.0.1:1/test?tabel=x", `unknown parameter "tabel": did you mean "table"?`},
		{"mysql://root@tcp(127.0.0.1:1)/test?tables=x", `unknown parameter "tables": did you mean "table"?`},
		{"sqlite:///nowhere/x.db?tabl=x", `unknown parameter "tabl": did you mean "table"?`},
		{"redis://127.0.0.1:1/0?prefx=a", `unknown parameter "prefx": did you mean "prefix"?`},
		{"redis://127.0.0.1:1/0?allow_evictions=true", `did you mean "allow_eviction"?`},
		{"datastore://p?namespce=a", `unknown parameter "namespce": did you mean "namespace"?`},
		{"firestore://p?colection=a", `did you mean "collection"?`},
	} {
		_, err := Open(t.Context(), tc.url)
		var ue *URLError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v; want a URLError saying %s", tc.url, err, tc.want)
		}
	}
	if err := misspelled([]string{"sslmode", "application_name", "tls", "table"}, "table"); err != nil {
		t.Errorf("misspelled of driver parameters = %v, want nil", err)
	}
}
