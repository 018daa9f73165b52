package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

// TestServerStopped stops a private server while a Claim is in flight and
// then uses the store: every operation must report an error, never a
// Won or a Complete that did not happen, and never ErrFenced.
func TestServerStopped(t *testing.T) {
	srv := testenv.Private(t, "redis", testenv.StartRedis)
	// No retries, so that the test sees the outage at once rather than
	// after go-redis's backoff (its retries of a script are safe, but slow).
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { client.Close() })
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { admin.Close() })
	s, err := redisstore.New(t.Context(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	held, err := s.Claim(ctx, "held", time.Minute, store.ClaimOptions{})
	if err != nil || held.Status != store.Won {
		t.Fatalf("Claim before the outage = %v, %v; want Won", held.Status, err)
	}

	// Hold writes so that the next Claim is parked inside the server, then
	// stop the server under it.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", time.Minute.Milliseconds(), "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		c   store.Claim
		err error
	}
	inflight := make(chan result, 1)
	go func() {
		c, err := s.Claim(ctx, "inflight", time.Minute, store.ClaimOptions{})
		inflight <- result{c, err}
	}()
	waitParked(t, admin)
	srv.Stop()
	if r := <-inflight; r.err == nil {
		t.Errorf("Claim in flight when the server stopped = %v, nil; want an error", r.c.Status)
	}

	if c, err := s.Claim(ctx, "fresh", time.Minute, store.ClaimOptions{}); err == nil {
		t.Errorf("Claim with the server down = %v, nil; want an error", c.Status)
	}
	if ok, err := s.Complete(ctx, held); err == nil {
		t.Errorf("Complete with the server down = %v, nil; want an error", ok)
	}
	if err := s.Release(ctx, held); err == nil {
		t.Error("Release with the server down = nil; want an error")
	}
	if _, err := s.Extend(ctx, held, time.Minute); err == nil || errors.Is(err, store.ErrFenced) {
		t.Errorf("Extend with the server down = %v; want a transport error, not ErrFenced", err)
	}
}

// waitParked waits until some client of the server is blocked in EVALSHA.
func waitParked(t *testing.T, admin *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := admin.ClientList(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(list, "\n") {
			if strings.Contains(line, "cmd=evalsha") && strings.Contains(line, "flags=b") {
				return
			}
		}
		time.Sleep(5 * time.Millisecond) // polling for a state, not ordering
	}
	t.Fatal("the Claim never reached the paused server")
}
