package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

// backend is a real store the commands run against.
type backend struct {
	name string
	// url returns the URL of a fresh, isolated store on the backend.
	url func(t *testing.T) string
	// purges says that the store needs purge (SQL).
	purges bool
	// clock says that check can measure the store's clock.
	clock bool
	// searches says that the store can list keys by suffix.
	searches bool
}

// withParam appends name=value to rawURL's query.
func withParam(rawURL, name, value string) string {
	sep := "?"
	if strings.Contains(rawURL[strings.LastIndex(rawURL, "/")+1:], "?") {
		sep = "&"
	}
	return rawURL + sep + name + "=" + value
}

var backends = []backend{
	{name: "Redis", searches: true, clock: true, url: func(t *testing.T) string {
		return "redis://" + testenv.RedisAddr(t) + "/0?prefix=" + unique() + ":"
	}},
	{name: "RedisCluster", searches: true, clock: true, url: func(t *testing.T) string {
		return "redis+cluster://" + strings.Join(testenv.RedisClusterAddrs(t), ",") + "?prefix=" + unique() + ":"
	}},
	{name: "PostgreSQL", searches: true, purges: true, clock: true, url: func(t *testing.T) string {
		return withParam(testenv.PostgresDSN(t), "table", unique())
	}},
	{name: "MariaDB", searches: true, purges: true, clock: true, url: func(t *testing.T) string {
		return withParam("mysql://"+testenv.MySQLDSN(t), "table", unique())
	}},
	{name: "SQLite", searches: true, purges: true, clock: true, url: func(t *testing.T) string {
		return "sqlite://" + filepath.Join(t.TempDir(), "records.db")
	}},
	{name: "Datastore", url: func(t *testing.T) string {
		testenv.DatastoreEmulatorHost(t) // fails or skips when there is none
		return "datastore://idemgate-test?namespace=" + unique()
	}},
	{name: "Firestore", url: func(t *testing.T) string {
		testenv.FirestoreEmulatorHost(t)
		return "firestore://idemgate-test?collection=" + unique()
	}},
}

// seeded is a store with one record in each state, as a service left it.
type seeded struct {
	st                   store.Store
	held, done, released store.Claim
}

// seed opens rawURL as the service does (creating a SQL table) and claims
// keys "held", "done" (completed) and "released".
func seed(t *testing.T, rawURL string) seeded {
	t.Helper()
	o, err := storeurl.Open(t.Context(), rawURL)
	if err != nil {
		t.Fatalf("Open(%q): %v", rawURL, err)
	}
	t.Cleanup(func() { o.Close() })
	s := seeded{st: o.Store}
	claim := func(key string) store.Claim {
		// "done" keeps a payload fingerprint, which inspect must show; each
		// names its delivery, as the gateway does.
		opts := store.ClaimOptions{Origin: "push/m-" + key}
		if key == "done" {
			opts.Fingerprint = []byte("order-7-payload")
		}
		c, err := o.Store.Claim(t.Context(), key, 30*time.Minute, opts) // shorter than the default ttl
		if err != nil || c.Status != store.Won {
			t.Fatalf("Claim(%q) = %v, %v; want Won", key, c.Status, err)
		}
		return c
	}
	s.held, s.done, s.released = claim("held"), claim("done"), claim("released")
	if ok, err := o.Store.Complete(t.Context(), s.done); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	if err := o.Store.Release(t.Context(), s.released); err != nil {
		t.Fatal(err)
	}
	return s
}

// inspectJSON runs inspect -json on keys and returns the records by key.
func inspectJSON(t *testing.T, url string, keys ...string) map[string]jsonRecord {
	t.Helper()
	r := idemgate(t, "", append([]string{"inspect", "-store", url, "-json"}, keys...)...)
	if r.code != exitOK {
		t.Fatalf("inspect = %d, stderr %q", r.code, r.stderr)
	}
	out := map[string]jsonRecord{}
	for line := range strings.Lines(r.stdout) {
		var j jsonRecord
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("inspect -json line %q: %v", line, err)
		}
		out[j.Key] = j
	}
	if n := len(slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return strings.HasPrefix(k, "-") })); len(out) != n {
		t.Fatalf("inspect -json printed %d records for %d keys:\n%s", len(out), len(keys), r.stdout)
	}
	return out
}

// readFunc is an io.Reader made of a function.
type readFunc func(p []byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

func TestCommands(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url := b.url(t)
			s := seed(t, url)

			// inspect: one record in each state, and an absent key.
			got := inspectJSON(t, url, "held", "done", "released", "absent")
			for key, want := range map[string]struct {
				status string
				fence  int64
			}{
				"held":     {"held", s.held.Fence},
				"done":     {"done", s.done.Fence},
				"released": {"released", 0}, // above s.released.Fence: see below
				"absent":   {"absent", 0},
			} {
				j := got[key]
				if key == "released" && j.Fence > s.released.Fence {
					want.fence = j.Fence // Release raised it; by how much is the store's
				}
				if j.Status != want.status || j.Fence != want.fence || j.Found != (key != "absent") {
					t.Errorf("inspect %s = %+v, want status %s, fence %d", key, j, want.status, want.fence)
				}
			}
			// The token, the claim's credential, is printed only when asked for.
			if j := got["held"]; strings.Contains(j.Token, s.held.Token) || !strings.Contains(j.Token, "-show-token") {
				t.Errorf("inspect held printed the token %q; want it hidden", j.Token)
			}
			if r := idemgate(t, "", "list", "-store", url, "-json"); r.code != exitOK || strings.Contains(r.stdout, s.held.Token) || !strings.Contains(r.stdout, "-show-token") {
				t.Errorf("list -json = %d, printed\n%s\nwant the held claim's token hidden", r.code, r.stdout)
			}
			if j := inspectJSON(t, url, "held", "-show-token")["held"]; j.Token != s.held.Token || j.LeaseUntil == nil || j.LeaseUntil.Sub(s.held.LeaseUntil).Abs() > time.Millisecond {
				t.Errorf("inspect -show-token held = %+v, want the holder's token %q and lease %v", j, s.held.Token, s.held.LeaseUntil)
			}
			if j := got["done"]; j.Fingerprint != hex.EncodeToString([]byte("order-7-payload")) || got["held"].Fingerprint != "" {
				t.Errorf("inspect fingerprints: done %q, held %q; want the kept one, and none", j.Fingerprint, got["held"].Fingerprint)
			}
			for key, j := range got {
				if want := map[string]string{"held": "push/m-held", "done": "push/m-done", "released": "push/m-released"}[key]; j.Origin != want {
					t.Errorf("inspect %s: origin %q, want %q", key, j.Origin, want)
				}
			}
			if j := got["done"]; j.CompletedAt == nil || j.LeaseUntil != nil || j.CompletedAt.Before(s.done.LeaseUntil.Add(-31*time.Minute)) || j.CompletedAt.After(*j.ReadAt) {
				t.Errorf("inspect done = %+v, want a completedAt between the claim and the read, and no leaseUntil", j)
			}
			r := idemgate(t, "", "inspect", "-store", url, "done", "held", "released", "absent")
			doneBy := fmt.Sprintf("done:       by push/m-done at %s", stamp(*got["done"].CompletedAt))
			if r.code != exitOK || !strings.Contains(r.stdout, "status:     done: the work succeeded") || !strings.Contains(r.stdout, `key:        "absent"`) ||
				!strings.Contains(r.stdout, doneBy) || !strings.Contains(r.stdout, fmt.Sprintf("ago), fence %d\n", s.done.Fence)) ||
				!strings.Contains(r.stdout, fmt.Sprintf("held:       by push/m-held, fence %d\n", s.held.Fence)) ||
				!strings.Contains(r.stdout, "released:   last held by push/m-released\n") {
				t.Errorf("inspect (text) = %d, want %q and the holders named:\n%s\n%s", r.code, doneBy, r.stdout, r.stderr)
			}

			// forget, not confirmed: nothing changes.
			r = idemgate(t, "n\n", "forget", "-store", url, "done")
			if r.code != exitProblem || !strings.Contains(r.stdout, "[y/N]") {
				t.Errorf("forget answered n = %d, stdout %q; want 1 after the question", r.code, r.stdout)
			}
			r.oneErrorLine(t, "not confirmed")
			if c, err := s.st.Claim(t.Context(), "done", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.AlreadyDone {
				t.Fatalf("after an unconfirmed forget, Claim = %v, %v; want AlreadyDone", c.Status, err)
			}

			// forget warns about a holder, and leaves alone a record that
			// changed while the question waited (its holder completed it).
			racing, err := s.st.Claim(t.Context(), "racing", time.Minute, store.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var out, errs bytes.Buffer
			answer := readFunc(func(p []byte) (int, error) {
				if ok, err := s.st.Complete(t.Context(), racing); !ok || err != nil {
					t.Errorf("the holder's Complete = %v, %v", ok, err)
				}
				return copy(p, "y\n"), io.EOF
			})
			code := run(t.Context(), []string{"forget", "-store", url, "racing"}, answer, &out, &errs)
			if code != exitOK || !strings.Contains(out.String(), "WARNING: a holder is working on it now") ||
				!strings.Contains(out.String(), `"racing": not forgotten: it changed since it was shown (now DONE`) {
				t.Fatalf("forget of a record that changed = %d:\n%s\n%s", code, out.String(), errs.String())
			}
			if c, err := s.st.Claim(t.Context(), "racing", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.AlreadyDone {
				t.Fatalf("after the refused forget, Claim = %v, %v; want AlreadyDone", c.Status, err)
			}

			// forget, confirmed: the holder is fenced out, the DONE key runs again.
			r = idemgate(t, "y\n", "forget", "-store", url, "held", "done", "absent")
			if r.code != exitProblem || strings.Count(r.stdout, ": forgotten") != 2 || !strings.Contains(r.stdout, `"absent": nothing to forget`) ||
				!strings.Contains(r.stderr, "1 of 3 keys had no live record") {
				t.Fatalf("forget = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if ok, err := s.st.Complete(t.Context(), s.held); ok || err != nil {
				t.Errorf("the holder's Complete after forget = %v, %v; want false (fenced out)", ok, err)
			}
			for _, old := range []store.Claim{s.held, s.done} {
				c, err := s.st.Claim(t.Context(), old.Key, time.Minute, store.ClaimOptions{})
				if err != nil || c.Status != store.Won || c.Fence <= old.Fence {
					t.Errorf("Claim(%q) after forget = %v fence %d, %v; want Won above fence %d", old.Key, c.Status, c.Fence, err, old.Fence)
				}
			}

			// forget -yes asks nothing; a key with no record needs no question.
			r = idemgate(t, "", "forget", "-store", url, "-yes", "released")
			if r.code != exitOK || strings.Contains(r.stdout, "[y/N]") || !strings.Contains(r.stdout, `"released": forgotten`) {
				t.Errorf("forget -yes = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			r = idemgate(t, "", "forget", "-store", url, "never-seen")
			if r.code != exitProblem || strings.Contains(r.stdout, "[y/N]") || !strings.Contains(r.stderr, "1 of 1 keys had no live record") {
				t.Errorf("forget of an absent key = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}

			// purge.
			r = idemgate(t, "", "purge", "-store", url)
			want := "nothing to purge"
			if b.purges {
				want = "purged 0 expired records"
			}
			if r.code != exitOK || !strings.Contains(r.stdout, want) {
				t.Errorf("purge = %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
			}

			// check.
			r = idemgate(t, "", "check", "-store", url)
			if r.code != exitOK || !strings.HasSuffix(r.stdout, "check: no problem found\n") {
				t.Errorf("check = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			clock := "skew not measurable"
			if b.clock {
				clock = "the store's clock is"
			}
			if !strings.Contains(r.stdout, clock) {
				t.Errorf("check output does not mention %q:\n%s", clock, r.stdout)
			}
		})
	}
}

// A lapsed claim's answer says that its work may have run, for the
// operator about to replay its message; a held one's does not.
func TestLapsedNamesTheCrashWindow(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		leaseUntil time.Time
		want       bool
	}{{now.Add(-time.Minute), true}, {now.Add(time.Minute), false}} {
		r := store.Record{Key: "k", State: store.Claimed, Token: "t", Fence: 1, LeaseUntil: tc.leaseUntil, ReadAt: now, ExpiresAt: now.Add(time.Hour)}
		var out bytes.Buffer
		writeRecord(&out, memOpened(t), "k", r, true, nearby{})
		if got := strings.Contains(out.String(), "check the sink before you replay"); got != tc.want {
			t.Errorf("lease until %v (read at %v): crash window said = %v, want %v:\n%s", tc.leaseUntil, now, got, tc.want, out.String())
		}
	}
}
