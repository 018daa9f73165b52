package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
)

// closedAddr returns a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// TestUnreachableStores: a store that cannot be reached costs one line on
// stderr and exit status 1, within -timeout, for every command.
func TestUnreachableStores(t *testing.T) {
	addr := closedAddr(t)
	for _, tc := range []struct {
		name, url, want string
	}{
		{"Redis", "redis://" + addr + "/0", "cannot reach"},
		{"PostgreSQL", "postgres://postgres@" + addr + "/test?sslmode=disable&connect_timeout=2", "cannot reach"},
		{"MariaDB", "mysql://root@tcp(" + addr + ")/test?timeout=2s", "cannot reach"},
		{"SQLite in a missing directory", "sqlite://" + filepath.Join(t.TempDir(), "no", "such", "dir.db"), "sqlite store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"inspect", "-store", tc.url, "-timeout", "5s", "k"},
				{"forget", "-store", tc.url, "-timeout", "5s", "-yes", "k"},
				{"purge", "-store", tc.url, "-timeout", "5s"},
			} {
				start := time.Now()
				r := idemgate(t, "", args...)
				if r.code != exitProblem {
					t.Errorf("%s: exit status = %d, want 1 (stdout %q)", args[0], r.code, r.stdout)
				}
				r.oneErrorLine(t, tc.want)
				if d := time.Since(start); d > 6*time.Second {
					t.Errorf("%s took %v, more than its -timeout", args[0], d)
				}
			}
			r := idemgate(t, "", "check", "-store", tc.url, "-timeout", "5s")
			if r.code != exitProblem || !strings.HasPrefix(r.stdout, "FAIL  store") || !strings.Contains(r.stdout, tc.want) {
				t.Errorf("check = %d, stdout %q; want 1 and a FAIL store line", r.code, r.stdout)
			}
		})
	}
}

// TestUnreachableEmulator: a Google store opens without I/O, so the first
// read meets the dead endpoint; -timeout ends the wait and says so.
func TestUnreachableEmulator(t *testing.T) {
	t.Setenv("DATASTORE_EMULATOR_HOST", closedAddr(t))
	start := time.Now()
	r := idemgate(t, "", "inspect", "-store", "datastore://idemgate-test", "-timeout", "1s", "k")
	if r.code != exitProblem {
		t.Errorf("exit status = %d, want 1", r.code)
	}
	r.oneErrorLine(t, "no answer within -timeout 1s")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("inspect took %v with -timeout 1s", d)
	}
	r = idemgate(t, "", "check", "-store", "datastore://idemgate-test", "-timeout", "1s")
	if r.code != exitProblem || !strings.Contains(r.stdout, "FAIL  read") {
		t.Errorf("check = %d, stdout %q; want 1 and a FAIL read line", r.code, r.stdout)
	}
}

// TestMissingTable: the commands create nothing; a missing table is a
// problem check reports and the others refuse.
func TestMissingTable(t *testing.T) {
	// An empty file is an SQLite database without tables.
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ url, table string }{
		"PostgreSQL": {withParam(testenv.PostgresDSN(t), "table", "missing_pg"), "missing_pg"},
		"MariaDB":    {withParam("mysql://"+testenv.MySQLDSN(t), "table", "missing_my"), "missing_my"},
		"SQLite":     {"sqlite://" + empty, "idemgate_records"},
	} {
		url := tc.url
		t.Run(name, func(t *testing.T) {
			r := idemgate(t, "", "check", "-store", url)
			if r.code != exitProblem || !strings.Contains(r.stdout, "FAIL  table") || !strings.HasSuffix(r.stdout, "check: 1 problem(s) found\n") {
				t.Errorf("check = %d:\n%s", r.code, r.stdout)
			}
			for _, args := range [][]string{{"inspect", "k"}, {"forget", "-yes", "k"}, {"purge"}} {
				r := idemgate(t, "", append([]string{args[0], "-store", url}, args[1:]...)...)
				if r.code != exitProblem {
					t.Errorf("%s: exit status = %d, want 1", args[0], r.code)
				}
				r.oneErrorLine(t, "missing")
				r.oneErrorLine(t, "table "+tc.table)
			}
			// Still missing: nothing was created.
			if r := idemgate(t, "", "check", "-store", url); r.code != exitProblem {
				t.Errorf("a second check = %d, want 1: a command created the table", r.code)
			}
		})
	}
}

// TestCheckEviction runs check against a private Redis whose policy may
// evict records.
func TestCheckEviction(t *testing.T) {
	srv := testenv.Private(t, "Redis", testenv.StartRedis)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if err := c.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	url := "redis://" + srv.Addr + "/0"
	r := idemgate(t, "", "check", "-store", url)
	if r.code != exitProblem || !strings.Contains(r.stdout, "FAIL  store") || !strings.Contains(r.stdout, "maxmemory-policy is allkeys-lru") {
		t.Errorf("check of an evicting Redis = %d:\n%s", r.code, r.stdout)
	}
	r = idemgate(t, "", "check", "-store", url+"?allow_eviction=true")
	if r.code != exitOK || !strings.Contains(r.stdout, "info  eviction  maxmemory-policy allkeys-lru may evict records, accepted by allow_eviction=true") {
		t.Errorf("check of an evicting Redis the URL accepts = %d:\n%s", r.code, r.stdout)
	}
	// The policy changed after the service started: check sees it again.
	if err := c.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	r = idemgate(t, "", "check", "-store", url)
	if r.code != exitOK || !strings.Contains(r.stdout, "ok    eviction  maxmemory-policy noeviction") {
		t.Errorf("check of a noeviction Redis = %d:\n%s", r.code, r.stdout)
	}
}

// cancellingReader is an operator who interrupts (cancel) instead of
// answering: its Read blocks until released.
type cancellingReader struct {
	cancel  context.CancelFunc
	release chan struct{}
}

func (r cancellingReader) Read([]byte) (int, error) {
	r.cancel()
	<-r.release
	return 0, io.EOF
}

// TestForgetInterrupted: an interrupt while forget waits for its answer
// forgets nothing and ends the command.
func TestForgetInterrupted(t *testing.T) {
	url := "redis://" + testenv.RedisAddr(t) + "/0?prefix=" + unique() + ":"
	s := seed(t, url)
	ctx, cancel := context.WithCancel(t.Context())
	stdin := cancellingReader{cancel: cancel, release: make(chan struct{})}
	defer close(stdin.release)
	var out, errs bytes.Buffer
	code := run(ctx, []string{"forget", "-store", url, "held"}, stdin, &out, &errs)
	r := result{code, out.String(), errs.String()}
	if r.code != exitProblem || !strings.Contains(r.stdout, "[y/N]") {
		t.Errorf("forget interrupted = %d, stdout %q; want 1 after the question", r.code, r.stdout)
	}
	r.oneErrorLine(t, "interrupted; nothing changed")
	if ok, err := s.st.Complete(t.Context(), s.held); !ok || err != nil {
		t.Errorf("the holder's Complete after an interrupted forget = %v, %v; want true", ok, err)
	}
}
