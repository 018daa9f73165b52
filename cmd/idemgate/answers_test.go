package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
)

// records is what an answer must name for rawURL: the table, key prefix,
// namespace or collection the backend's URL gives, or the default.
func records(t *testing.T, rawURL string) string {
	t.Helper()
	_, query, _ := strings.Cut(rawURL[strings.LastIndex(rawURL, "/")+1:], "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case q.Has("table"):
		return "table " + q.Get("table")
	case q.Has("prefix"):
		return `key prefix "` + q.Get("prefix") + `"`
	case q.Has("namespace"):
		return `namespace "` + q.Get("namespace") + `"`
	case q.Has("collection"):
		return "collection " + q.Get("collection")
	}
	return "table idemgate_records (default)" // SQLite's backend URL
}

// TestAnswersNameTheStore: every command says which store and which table,
// prefix, namespace or collection it read, and an absent key gets the
// records whose key ends with it, or the route prefixes of the examples.
func TestAnswersNameTheStore(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			rawURL := b.url(t)
			s := seed(t, rawURL)
			c, err := s.st.Claim(t.Context(), "msg:100", 30*time.Minute, store.ClaimOptions{})
			if err != nil || c.Status != store.Won {
				t.Fatalf("Claim(msg:100) = %v, %v", c.Status, err)
			}
			if ok, err := s.st.Complete(t.Context(), c); !ok || err != nil {
				t.Fatalf("Complete = %v, %v", ok, err)
			}
			scheme, _, _ := strings.Cut(rawURL, "://")
			where := records(t, rawURL)
			named := func(what string, r result) {
				t.Helper()
				out := r.stdout + r.stderr
				if !strings.Contains(out, where) || !strings.Contains(out, " of "+scheme+"://") {
					t.Errorf("%s does not name %q of the %s store:\n%s", what, where, scheme, out)
				}
				if strings.Contains(out, "@") {
					t.Errorf("%s shows the URL's user:\n%s", what, out)
				}
			}

			r := idemgate(t, "", "inspect", "-store", rawURL, "done", "100")
			named("inspect", r)
			if b.searches {
				if !strings.Contains(r.stdout, `"msg:100" (done)`) {
					t.Errorf("inspect of an absent 100 does not show the record msg:100:\n%s", r.stdout)
				}
			} else if !strings.Contains(r.stdout, "cannot search keys by suffix") || !strings.Contains(r.stdout, "hint:       this store's keys carry a prefix: try msg:100\n") {
				t.Errorf("inspect of an absent 100 does not say that the store cannot search, nor hint at the prefix its keys carry:\n%s", r.stdout)
			}
			if strings.Contains(r.stdout, "completed:") {
				t.Errorf("inspect shows a completion time the store does not keep:\n%s", r.stdout)
			}
			if i := strings.Index(r.stdout, `"done"`); i < 0 || strings.Contains(r.stdout[i:strings.Index(r.stdout[i:], "read at")+i], "lease:") {
				t.Errorf("inspect shows a lease for a DONE record:\n%s", r.stdout)
			}
			clock := "the store's clock"
			if !b.clock {
				clock = "this machine's clock"
			}
			if !strings.Contains(r.stdout, clock) {
				t.Errorf("inspect does not say the instants are on %s:\n%s", clock, r.stdout)
			}

			r = idemgate(t, "", "inspect", "-store", rawURL, "-json", "done", "100")
			for line := range strings.Lines(r.stdout) {
				var j map[string]any
				if err := json.Unmarshal([]byte(line), &j); err != nil {
					t.Fatalf("inspect -json line %q: %v", line, err)
				}
				named("inspect -json", result{stdout: fmt.Sprint(j["store"])})
				if _, ok := j["completedAt"]; ok != (j["state"] == "DONE") {
					t.Errorf("inspect -json shows a completedAt = %v, want one exactly for a DONE record: %s", ok, line)
				}
				if _, ok := j["leaseUntil"]; ok && j["state"] == "DONE" {
					t.Errorf("inspect -json shows a lease for a DONE record: %s", line)
				}
				if j["key"] == "100" && b.searches && !strings.Contains(line, `"msg:100"`) {
					t.Errorf("inspect -json of an absent 100 does not list msg:100: %s", line)
				}
			}

			named("forget", idemgate(t, "", "forget", "-store", rawURL, "-yes", "never-seen"))
			named("purge", idemgate(t, "", "purge", "-store", rawURL))
			named("check", idemgate(t, "", "check", "-store", rawURL))
		})
	}
}

// TestDefaultPrefixNamed: a Redis URL without a prefix reads the default
// one, and says so.
func TestDefaultPrefixNamed(t *testing.T) {
	r := idemgate(t, "", "inspect", "-store", "redis://"+testenv.RedisAddr(t)+"/0", unique())
	if r.code != exitOK || !strings.Contains(r.stdout, `key prefix "idemgate:" (default) of redis://`) {
		t.Errorf("inspect on a URL without prefix = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestRedisTimeout: -timeout bounds a Redis that accepts and never answers.
func TestRedisTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	start := time.Now()
	r := idemgate(t, "", "inspect", "-store", "redis://"+ln.Addr().String()+"/0", "-timeout", "1s", "k")
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("inspect with -timeout 1s took %v", d)
	}
	if r.code != exitProblem {
		t.Errorf("exit status = %d, want 1", r.code)
	}
	r.oneErrorLine(t, "-timeout 1s")
}

// TestNoClientLogLines runs the real main against an unreachable Redis:
// go-redis's own pool lines must not come before the tool's error.
func TestNoClientLogLines(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe, "inspect", "-store", "redis://"+closedAddr(t)+"/0", "-timeout", "3s", "k")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var errs strings.Builder
	cmd.Stderr = &errs
	err = cmd.Run()
	if ee := (*exec.ExitError)(nil); err == nil || !errorsAs(err, &ee) || ee.ExitCode() != exitProblem {
		t.Errorf("idemgate = %v, want exit status 1", err)
	}
	r := result{exitProblem, "", errs.String()}
	r.oneErrorLine(t, "cannot reach")
}

func TestSQLiteTypo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	r := idemgate(t, "", "inspect", "-store", "sqlite://"+path, "k")
	if r.code != exitProblem {
		t.Errorf("inspect of a missing SQLite file = %d, want 1:\n%s", r.code, r.stdout)
	}
	r.oneErrorLine(t, "no database file")
	if _, err := os.Stat(path); err == nil {
		t.Errorf("inspect created the missing SQLite file %s", path)
	}
}

// TestNaturalMySQLURL: mysql://user@host:port/db reads the same records as
// the driver's DSN form.
func TestNaturalMySQLURL(t *testing.T) {
	table := unique()
	dsn := withParam("mysql://"+testenv.MySQLDSN(t), "table", table)
	seed(t, dsn)
	natural := strings.Replace(strings.Replace(dsn, "tcp(", "", 1), ")/", "/", 1)
	r := idemgate(t, "", "inspect", "-store", natural, "-json", "done")
	if r.code != exitOK || !strings.Contains(r.stdout, `"status":"done"`) {
		t.Errorf("inspect -store %s = %d:\n%s\n%s", natural, r.code, r.stdout, r.stderr)
	}
}

// TestFlagsAfterKeys: inspect KEY -json takes -json as a flag.
func TestFlagsAfterKeys(t *testing.T) {
	rawURL := "redis://" + testenv.RedisAddr(t) + "/0?prefix=" + unique() + ":"
	r := idemgate(t, "", "inspect", "-store", rawURL, "k", "-json")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, `{"key":"k"`) || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("inspect k -json = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = idemgate(t, "", "inspect", "-store", rawURL, "-json", "--", "-k")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, `{"key":"-k"`) {
		t.Errorf("inspect -json -- -k = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestForgetAnswerOnItsLine: a piped answer is not echoed, so forget ends
// the question's line itself.
func TestForgetAnswerOnItsLine(t *testing.T) {
	rawURL := "redis://" + testenv.RedisAddr(t) + "/0?prefix=" + unique() + ":"
	seed(t, rawURL)
	r := idemgate(t, "y\n", "forget", "-store", rawURL, "done")
	if r.code != exitOK || !strings.Contains(r.stdout, "[y/N] \n\"done\": forgotten") {
		t.Errorf("forget = %d:\n%s", r.code, r.stdout)
	}
}

// TestUsageErrors: a URL the tool cannot use as written is a usage error,
// in the tool's words.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct{ name, url, want string }{
		{"unknown scheme", "foo://x", `unknown store "foo"`},
		{"not a URL", "localhost:6379", "not a store URL"},
		{"bad parameter", "redis://127.0.0.1:1/0?ttl=soon", "parameter ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := idemgate(t, "", "inspect", "-store", tc.url, "k")
			if r.code != exitUsage {
				t.Errorf("exit status = %d, want 2", r.code)
			}
			r.oneErrorLine(t, tc.want)
			if strings.Contains(r.stderr, "storeurl") || strings.Contains(r.stderr, "memory") {
				t.Errorf("stderr = %q: names an internal package, or lists memory, which the tool refuses", r.stderr)
			}
		})
	}
}

// TestHelpOnStdout: help that was asked for goes to stdout, exit 0.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"inspect", "-h"}, {"forget", "-help"}, {"digest", "-h"}} {
		r := idemgate(t, "", args...)
		if r.code != exitOK || !strings.Contains(r.stdout, "usage: idemgate") || r.stderr != "" {
			t.Errorf("%v = %d, stdout %q, stderr %q; want the usage on stdout", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestRedisLongTimeout: a -timeout longer than go-redis's own 3 s read
// timeout is honoured: a Redis that answers each command after 3.2 s is
// slow, not unreachable.
func TestRedisLongTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits several slow round trips")
	}
	t.Parallel() // it mostly waits
	px := testenv.NewProxy(t, testenv.RedisAddr(t))
	px.Latency(t, testenv.Downstream, 3200*time.Millisecond)
	rawURL := "redis://" + px.Addr + "/0?allow_eviction=true&prefix=" + unique() + ":"
	r := idemgate(t, "", "inspect", "-store", rawURL, "-timeout", "40s", "-json", "k")
	if r.code != exitOK || !strings.Contains(r.stdout, `"status":"absent"`) {
		t.Errorf("inspect through a slow link with -timeout 40s = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
