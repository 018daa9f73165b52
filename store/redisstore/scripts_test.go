package redisstore_test

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

// recorder records the name of every command a client sends, pipelined or
// not (install it with client.AddHook(cmdHook(rec.add))).
type recorder struct {
	mu   sync.Mutex // guards cmds
	cmds []string
}

func (r *recorder) add(cmd redis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, strings.ToUpper(cmd.Name()))
}

// take returns the commands recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmds := r.cmds
	r.cmds = nil
	return cmds
}

// TestCommandCounts pins the cost of the common paths: a fresh message
// (Claim won, Complete) is two commands, a duplicate (Claim already done,
// held by another or already failed) is one, and so is a Fail. Every Claim carries a full-size fingerprint,
// which rides in the same command. The scripts are cached on the server
// first, as they are after the first message, so no NOSCRIPT fallback is
// counted here.
func TestCommandCounts(t *testing.T) {
	client := newClient(t)
	rec := &recorder{}
	client.AddHook(cmdHook(rec.add))
	s := newStore(t, client, &redisstore.Options{Prefix: uniquePrefix(t)})
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: bytes.Repeat([]byte{0xfe}, store.MaxFingerprintLen)}

	warm, err := s.Claim(ctx, "warm-up", time.Minute, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, warm); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "warm-up", time.Minute, opts); err != nil {
		t.Fatal(err)
	}
	rec.take()

	c, err := s.Claim(ctx, "fresh", time.Minute, opts)
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim = %v, %v; want Won", c.Status, err)
	}
	if ok, err := s.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete = %v, %v; want true", ok, err)
	}
	if got := rec.take(); len(got) != 2 || got[0] != "EVALSHA" || got[1] != "EVALSHA" {
		t.Errorf("a fresh message sent %v, want 2 commands: [EVALSHA EVALSHA]", got)
	}

	d, err := s.Claim(ctx, "fresh", time.Minute, opts)
	if err != nil || d.Status != store.AlreadyDone {
		t.Fatalf("Claim = %v, %v; want AlreadyDone", d.Status, err)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "EVALSHA" {
		t.Errorf("a duplicate sent %v, want 1 command: [EVALSHA]", got)
	}

	if _, err := s.Claim(ctx, "held", time.Minute, opts); err != nil {
		t.Fatal(err)
	}
	rec.take()
	h, err := s.Claim(ctx, "held", time.Minute, opts)
	if err != nil || h.Status != store.HeldByOther {
		t.Fatalf("Claim = %v, %v; want HeldByOther", h.Status, err)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "EVALSHA" {
		t.Errorf("a duplicate of a held key sent %v, want 1 command: [EVALSHA]", got)
	}

	if _, _, err := s.Fail(ctx, h, store.Failure{}); !errors.Is(err, store.ErrNotWon) {
		t.Errorf("Fail of a HeldByOther claim = %v, want ErrNotWon", err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("a Fail of a claim not won sent %v, want nothing", got)
	}
	f, err := s.Claim(ctx, "failed", time.Minute, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec.take()
	if _, failed, err := s.Fail(ctx, f, store.Failure{Reason: "bad", Final: true}); !failed || err != nil {
		t.Fatalf("final Fail = %v, %v; want FAILED", failed, err)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "EVALSHA" {
		t.Errorf("a Fail sent %v, want 1 command: [EVALSHA]", got)
	}
	if d, err := s.Claim(ctx, "failed", time.Minute, opts); err != nil || d.Status != store.AlreadyFailed {
		t.Fatalf("Claim = %v, %v; want AlreadyFailed", d.Status, err)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "EVALSHA" {
		t.Errorf("a duplicate of a failed key sent %v, want 1 command: [EVALSHA]", got)
	}

	long := store.ClaimOptions{Fingerprint: make([]byte, store.MaxFingerprintLen+1)}
	if _, err := s.Claim(ctx, "long", time.Minute, long); !errors.Is(err, store.ErrInvalidFingerprint) {
		t.Errorf("Claim with a fingerprint too long = %v, want ErrInvalidFingerprint", err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("a Claim with a fingerprint too long sent %v, want nothing", got)
	}
}

// TestScriptCacheFlushed checks the NOSCRIPT fallback: after SCRIPT FLUSH
// (or a restart, or a failover to a replica that never saw the scripts)
// every operation still works, at the price of one extra command the first
// time: EVALSHA answers NOSCRIPT, then EVAL runs and caches the script.
// It runs on a private server, so the flush disturbs no other test.
func TestScriptCacheFlushed(t *testing.T) {
	srv := testenv.Private(t, "redis", testenv.StartRedis)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	rec := &recorder{}
	client.AddHook(cmdHook(rec.add))
	s, err := redisstore.New(t.Context(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := store.Extender(s)
	ctx := t.Context()
	flush := func() {
		t.Helper()
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		rec.take()
	}
	wantFallback := func(op string) {
		t.Helper()
		if got := rec.take(); strings.Join(got, " ") != "EVALSHA EVAL" {
			t.Errorf("%s on a flushed script cache sent %v, want [EVALSHA EVAL]", op, got)
		}
	}

	flush()
	a, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil || a.Status != store.Won {
		t.Fatalf("Claim after SCRIPT FLUSH = %v, %v; want Won", a.Status, err)
	}
	wantFallback("Claim")
	if _, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 1 {
		t.Errorf("the next Claim sent %v, want one EVALSHA: EVAL must have cached the script", got)
	}

	flush()
	if a, err = x.Extend(ctx, a, time.Minute); err != nil {
		t.Fatalf("Extend after SCRIPT FLUSH: %v", err)
	}
	wantFallback("Extend")

	flush()
	if err := s.Release(ctx, a); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH: %v", err)
	}
	wantFallback("Release")

	b, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil || b.Status != store.Won || b.Fence < a.Fence+2 {
		t.Fatalf("Claim after Release = %+v, %v; want Won at fence %d or above", b, err, a.Fence+2)
	}
	flush()
	if ok, err := s.Complete(ctx, b); !ok || err != nil {
		t.Fatalf("Complete after SCRIPT FLUSH = %v, %v; want true", ok, err)
	}
	wantFallback("Complete")

	d, err := s.Claim(ctx, "f", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	flush()
	if _, failed, err := s.Fail(ctx, d, store.Failure{Reason: "bad", Final: true}); !failed || err != nil {
		t.Fatalf("Fail after SCRIPT FLUSH = %v, %v; want FAILED", failed, err)
	}
	wantFallback("Fail")
}

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
