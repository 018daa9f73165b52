package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// wins fails t unless a Claim of key wins: a retried key runs its work.
func wins(t *testing.T, st store.Store, key string) {
	t.Helper()
	if c, err := st.Claim(t.Context(), key, time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.Won {
		t.Errorf("Claim(%q) after retry = %v, %v; want Won", key, c.Status, err)
	}
}

// stillFailed fails t unless key's record is still FAILED.
func stillFailed(t *testing.T, st store.Store, key string) {
	t.Helper()
	if c, err := st.Claim(t.Context(), key, time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.AlreadyFailed {
		t.Errorf("Claim(%q) = %v, %v; want AlreadyFailed: the key was not to be retried", key, c.Status, err)
	}
}

// retry on a memory store: by key, then by reason, dry run first; a
// second retry reports the key unchanged.
func TestRetryOn(t *testing.T) {
	o := memOpened(t)
	seedFailed(t, o.Store)
	var out bytes.Buffer
	c := &cli{stdout: &out}
	// run retries how, and fails t unless retryOn's error is the one
	// expected for the keys not retried.
	run := func(how retrying, notRetried ...string) string {
		t.Helper()
		out.Reset()
		err := c.retryOn(t.Context(), o, how)
		if want := fmt.Sprintf("%d of %d keys not retried", len(notRetried), len(how.keys)); len(notRetried) > 0 && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Fatalf("retry %+v: %v; want %q", how, err, want)
		} else if len(notRetried) == 0 && err != nil {
			t.Fatalf("retry %+v: %v", how, err)
		}
		return out.String()
	}

	got := run(retrying{keys: []string{"order-3", "order-4"}}, "order-4")
	if !strings.Contains(got, `"order-3": retried: the next delivery runs the work`) || !strings.Contains(got, `"order-4": not FAILED any more; unchanged`) ||
		!strings.HasSuffix(got, "retried 1 of 2.\n") {
		t.Errorf("retry order-3 order-4 printed\n%s", got)
	}
	wins(t, o.Store, "order-3")
	if got := run(retrying{keys: []string{"order-3"}}, "order-3"); !strings.Contains(got, `"order-3": not FAILED any more; unchanged`) {
		t.Errorf("a second retry of order-3 printed\n%s", got)
	}

	card := selection{reason: "card"}
	got = run(retrying{sel: card, selecting: true, dryRun: true})
	if !strings.Contains(got, `"order-2": FAILED after 1 attempt, reason "card declined": would be retried`) || !strings.Contains(got, "dry run: 2 records would be retried") {
		t.Errorf("retry -reason card -dry-run printed\n%s", got)
	}
	stillFailed(t, o.Store, "order-1")
	got = run(retrying{keys: []string{"order-1", "order-4"}, dryRun: true})
	if !strings.Contains(got, `"order-1": FAILED after 1 attempt`) || !strings.Contains(got, `"order-4": not FAILED (held); would be unchanged`) {
		t.Errorf("retry -dry-run order-1 order-4 printed\n%s", got)
	}

	got = run(retrying{sel: card, selecting: true})
	if !strings.Contains(got, `selected: FAILED records with a reason starting "card": 2 records`) || strings.Count(got, ": retried:") != 2 {
		t.Errorf("retry -reason card printed\n%s", got)
	}
	wins(t, o.Store, "order-1")
	wins(t, o.Store, "order-2")
	if got := run(retrying{sel: card, selecting: true}); !strings.Contains(got, "0 records") || !strings.HasSuffix(got, "retried 0 of 0.\n") {
		t.Errorf("a second retry -reason card printed\n%s", got)
	}
}

// TestRetry runs retry against every real store. It needs the store's
// store.Failer.
func TestRetry(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url, st := failedOnBackend(t, b)

			// By key: the key runs again; a second retry changes nothing.
			r := idemgate(t, "", "retry", "-store", url, "order-3")
			if r.code != exitOK || !strings.Contains(r.stdout, `"order-3": retried`) {
				t.Fatalf("retry order-3 = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			wins(t, st, "order-3")
			r = idemgate(t, "", "retry", "-store", url, "order-3", "held")
			if r.code != exitProblem || !strings.Contains(r.stdout, `"order-3": not FAILED any more; unchanged`) || !strings.Contains(r.stdout, `"held": not FAILED any more; unchanged`) ||
				!strings.Contains(r.stderr, "2 of 2 keys not retried") {
				t.Errorf("a second retry of order-3 = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}

			// By reason: a dry run first, which changes nothing.
			r = idemgate(t, "", "retry", "-store", url, "-reason", "card", "-dry-run")
			if r.code != exitOK || strings.Count(r.stdout, "would be retried") != 3 { // two keys, and the total
				t.Errorf("retry -reason card -dry-run = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			stillFailed(t, st, "order-2")
			r = idemgate(t, "", "retry", "-store", url, "-reason", "card")
			if r.code != exitOK || strings.Count(r.stdout, ": retried") != 2 || !strings.HasSuffix(r.stdout, "retried 2 of 2.\n") {
				t.Errorf("retry -reason card = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			wins(t, st, "order-1")
			wins(t, st, "order-2")
			r = idemgate(t, "", "retry", "-store", url, "-reason", "card")
			if r.code != exitOK || !strings.HasSuffix(r.stdout, "retried 0 of 0.\n") {
				t.Errorf("a second retry -reason card = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			r = idemgate(t, "", "failed", "-store", url, "-keys")
			if r.code != exitOK || r.stdout != "" {
				t.Errorf("failed after every retry = %d, %q; want no key", r.code, r.stdout)
			}
		})
	}
}

func TestRetryUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"retry", "-store", "sqlite:///nowhere.db"}, "no KEY given"},
		{[]string{"retry", "-store", "sqlite:///nowhere.db", "-reason", "x", "order-1"}, "not both"},
		{[]string{"retry", "-store", "sqlite:///nowhere.db", "-older", "-1s"}, "negative"},
		{[]string{"retry", "-store", "sqlite:///nowhere.db", "a\x00b"}, "NUL"},
	} {
		r := idemgate(t, "", tc.args...)
		if r.code != exitUsage {
			t.Errorf("%q = %d, want %d (usage)", tc.args, r.code, exitUsage)
		}
		r.oneErrorLine(t, tc.want)
	}
}

// A store that does not keep failures gets a clear error, not a retry.
func TestRetryNeedsFailer(t *testing.T) {
	o := memOpened(t)
	o.Store = struct{ store.Store }{o.Store} // hides Fail and Retry
	c := &cli{stdout: new(bytes.Buffer)}
	err := c.retryOn(t.Context(), o, retrying{keys: []string{"order-1"}})
	if err == nil || !strings.Contains(err.Error(), "the memory store cannot retry FAILED records: it does not implement store.Failer") {
		t.Errorf("retry on a store without Failer = %v", err)
	}
}
