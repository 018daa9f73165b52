package redisstore_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
)

// TestDuplicateClaimWritesNothing claims and completes a key on a private
// server, and fails another for good, then claims both again: the
// duplicates must leave the server's dirty counter
// (rdb_changes_since_last_save), which every write command moves, where it
// was, and must not run a write command (INFO commandstats). A private
// server, because other tests write to the shared one at the same time.
func TestDuplicateClaimWritesNothing(t *testing.T) {
	srv := testenv.Private(t, "redis", testenv.StartRedis)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	t.Cleanup(func() { client.Close() })
	s := newStore(t, client, nil)
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: []byte("payload")}

	c, err := s.Claim(ctx, "k", time.Minute, opts)
	if err != nil || c.Status != store.Won {
		t.Fatalf("fresh Claim = %+v, %v; want Won", c, err)
	}
	if ok, err := s.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete = %v, %v; want true", ok, err)
	}
	f, err := s.Claim(ctx, "f", time.Minute, opts)
	if err != nil || f.Status != store.Won {
		t.Fatalf("fresh Claim = %+v, %v; want Won", f, err)
	}
	if _, failed, err := s.Fail(ctx, f, store.Failure{Reason: "bad", Final: true}); !failed || err != nil {
		t.Fatalf("final Fail = %v, %v; want FAILED", failed, err)
	}
	counts := func() (dirty, writes string) {
		t.Helper()
		info, err := client.Info(ctx, "persistence", "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		var w []string
		for line := range strings.Lines(info) {
			line = strings.TrimSpace(line)
			if v, ok := strings.CutPrefix(line, "rdb_changes_since_last_save:"); ok {
				dirty = v
			}
			// The write commands a script could run on a record.
			for _, cmd := range []string{"set", "pexpire", "pexpireat", "del", "getex", "persist"} {
				if strings.HasPrefix(line, "cmdstat_"+cmd+":") {
					calls, _, _ := strings.Cut(line, ",")
					w = append(w, calls)
				}
			}
		}
		if dirty == "" {
			t.Fatalf("INFO has no rdb_changes_since_last_save:\n%s", info)
		}
		return dirty, strings.Join(w, " ")
	}
	dirty, writes := counts()
	for range 3 {
		d, err := s.Claim(ctx, "k", time.Minute, opts)
		if err != nil || d.Status != store.AlreadyDone || d.Fence != c.Fence || !bytes.Equal(d.Fingerprint, []byte("payload")) {
			t.Fatalf("duplicate Claim = %+v, %v; want AlreadyDone at fence %d", d, err, c.Fence)
		}
		d, err = s.Claim(ctx, "f", time.Minute, opts)
		if err != nil || d.Status != store.AlreadyFailed || d.Fence != f.Fence || d.Attempts != 1 || d.Reason != "bad" {
			t.Fatalf("Claim of a FAILED key = %+v, %v; want AlreadyFailed at fence %d, 1 attempt, reason bad", d, err, f.Fence)
		}
	}
	if d, w := counts(); d != dirty || w != writes {
		t.Errorf("duplicate Claims wrote: dirty %s, %q before; dirty %s, %q after", dirty, writes, d, w)
	} else {
		t.Logf("dirty %s, %q before and after", dirty, writes)
	}
}
