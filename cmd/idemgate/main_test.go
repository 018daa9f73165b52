package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"idemgate"}, os.Args[1:]...)
		main()
	}
	// The Google stores' clients honour the emulator host variables.
	for _, use := range []func() error{testenv.UseDatastoreEmulator, testenv.UseFirestoreEmulator} {
		if err := use(); err != nil {
			fmt.Fprintln(os.Stderr, "idemgate tests:", err)
		}
	}
	testenv.Main(m)
}

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// idemgate runs the command line args in-process, stdin given.
func idemgate(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	return idemgateCtx(t.Context(), stdin, args...)
}

func idemgateCtx(ctx context.Context, stdin string, args ...string) result {
	var out, errs bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &out, &errs)
	return result{code, out.String(), errs.String()}
}

// oneErrorLine fails t unless r wrote exactly one line to stderr, starting
// with "idemgate: " and containing want, and no stack trace.
func (r result) oneErrorLine(t testing.TB, want string) {
	t.Helper()
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "idemgate: ") || strings.Contains(r.stderr, "goroutine") {
		t.Errorf("stderr = %q, want one line starting with \"idemgate: \"", r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr = %q, want it to mention %q", r.stderr, want)
	}
}

// unique returns a name no other test uses, usable as a table name, a
// prefix, a namespace or a collection.
func unique() string { return "idemgate_cli_" + strings.ToLower(rand.Text()[:10]) }

func TestUsage(t *testing.T) {
	t.Setenv(storeEnv, "")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout or stderr
	}{
		{"no command", nil, exitUsage, "usage: idemgate COMMAND"},
		{"help", []string{"-h"}, exitOK, "Exit status:"},
		{"help command", []string{"help"}, exitOK, "inspect [-json] KEY…"},
		{"unknown command", []string{"inspec"}, exitUsage, `unknown command "inspec"`},
		{"command help", []string{"inspect", "-h"}, exitOK, "Exit status: 0 done as asked"},
		{"forget help", []string{"forget", "-h"}, exitOK, "-yes"},
		{"check help", []string{"check", "-h"}, exitOK, "-max-skew"},
		{"purge help", []string{"purge", "-h"}, exitOK, "-batch"},
		{"failed help", []string{"failed", "-h"}, exitOK, "-older"},
		{"retry help", []string{"retry", "-h"}, exitOK, "-dry-run"},
		{"usage names failed", []string{"-h"}, exitOK, "failed [-reason R]"},
		{"bad flag", []string{"inspect", "-jsn", "k"}, exitUsage, "flag provided but not defined"},
		{"no key", []string{"inspect", "-store", "redis://127.0.0.1:6379/0"}, exitUsage, "no KEY given"},
		{"invalid key", []string{"forget", "-store", "redis://127.0.0.1:6379/0", "a\x00b"}, exitUsage, "NUL"},
		{"no store", []string{"inspect", "k"}, exitUsage, "give -store URL or set IDEMGATE_STORE"},
		{"memory store", []string{"check", "-store", "memory://"}, exitUsage, "store of one process"},
		{"check takes no arguments", []string{"check", "x"}, exitUsage, "no arguments"},
		{"purge batch", []string{"purge", "-batch", "0"}, exitUsage, "-batch must be positive"},
		{"version", []string{"version"}, exitOK, runtime.Version()},
		{"version takes no arguments", []string{"version", "x"}, exitUsage, "no arguments"},
		{"garbage cursor", []string{"list", "-store", "redis://127.0.0.1:6379/0", "-cursor", "garbage"}, exitUsage, `-cursor "garbage" is not one a listing printed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := idemgate(t, "", tc.args...)
			if r.code != tc.code {
				t.Errorf("exit status = %d, want %d (stderr %q)", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Errorf("output does not mention %q:\nstdout: %s\nstderr: %s", tc.want, r.stdout, r.stderr)
			}
		})
	}
}

func TestStoreFromEnvironment(t *testing.T) {
	t.Setenv(storeEnv, "redis://"+testenv.RedisAddr(t)+"/0?prefix="+unique()+":")
	r := idemgate(t, "", "inspect", "-json", "k")
	if r.code != exitOK || !strings.Contains(r.stdout, `"status":"absent"`) {
		t.Fatalf("inspect with the store in %s = %d, %q, %q; want the key absent", storeEnv, r.code, r.stdout, r.stderr)
	}
}

func TestHelpHidesTheStoreURL(t *testing.T) {
	t.Setenv(storeEnv, "postgres://app:s3cret@db:5432/orders")
	for _, cmd := range []string{"inspect", "forget", "purge", "check", "failed", "retry"} {
		if r := idemgate(t, "", cmd, "-h"); strings.Contains(r.stdout+r.stderr, "s3cret") {
			t.Errorf("%s -h prints the store URL from %s, password included:\n%s", cmd, storeEnv, r.stderr)
		}
	}
}

// runMainEnv, set to 1, makes the test binary run the command's main with
// its arguments, for tests of what main alone sets up.
const runMainEnv = "IDEMGATE_TEST_RUN_MAIN"

func errorsAs(err error, target any) bool { return errors.As(err, target) }
