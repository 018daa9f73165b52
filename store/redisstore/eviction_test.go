package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

// The tests here change maxmemory-policy with CONFIG SET, so they run on
// servers of their own: the shared test server must never be reconfigured.

// setPolicy sets the maxmemory-policy of the private server behind admin.
func setPolicy(t *testing.T, admin *redis.Client, policy string) {
	t.Helper()
	if err := admin.ConfigSet(t.Context(), "maxmemory-policy", policy).Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory-policy %s: %v", policy, err)
	}
}

// privateClient starts a private server and returns a client of it.
func privateClient(t *testing.T) *redis.Client {
	t.Helper()
	srv := testenv.Private(t, "redis", testenv.StartRedis)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	return client
}

// wantEvictionError checks that err refuses policy, on addr, in words that
// name the policy and both ways out.
func wantEvictionError(t *testing.T, err error, addr, policy string) {
	t.Helper()
	var ee *redisstore.EvictionError
	if !errors.As(err, &ee) {
		t.Fatalf("New on maxmemory-policy %s = %v; want an *EvictionError", policy, err)
	}
	if ee.Policy != policy || ee.Addr != addr {
		t.Errorf("EvictionError = {Addr: %q, Policy: %q}; want {%q, %q}", ee.Addr, ee.Policy, addr, policy)
	}
	msg := err.Error()
	for _, want := range []string{"redisstore: ", policy, "set maxmemory-policy to noeviction", "Options.AllowEviction"} {
		if !strings.Contains(msg, want) {
			t.Errorf("New error %q does not mention %q", msg, want)
		}
	}
}

// useStore runs a message and its duplicate through s, so that a store New
// accepted is shown to work.
func useStore(t *testing.T, s *redisstore.Store) {
	t.Helper()
	ctx := t.Context()
	c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim = %v, %v; want Won", c.Status, err)
	}
	if ok, err := s.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete = %v, %v; want true", ok, err)
	}
	if d, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || d.Status != store.AlreadyDone {
		t.Fatalf("second Claim = %v, %v; want AlreadyDone", d.Status, err)
	}
}

// TestEvictionPolicy checks that New accepts noeviction and refuses every
// policy that can evict, which is all the others: idemgate's records carry
// an expiry, so the volatile-* policies evict them too. The server runs
// with maxmemory 0 (no limit), so nothing would be evicted yet: the policy
// alone decides, since maxmemory can be set at any time.
func TestEvictionPolicy(t *testing.T) {
	client := privateClient(t)
	setPolicy(t, client, "noeviction")
	useStore(t, newStore(t, client, &redisstore.Options{Prefix: uniquePrefix(t)}))

	for _, policy := range []string{
		"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
		"allkeys-lru", "allkeys-lfu", "allkeys-random",
	} {
		t.Run(policy, func(t *testing.T) {
			setPolicy(t, client, policy)
			s, err := redisstore.New(t.Context(), client, nil)
			if err == nil {
				t.Fatalf("New = %v, nil on maxmemory-policy %s; want a refusal", s, policy)
			}
			wantEvictionError(t, err, "", policy)
		})
	}
}

// TestAllowEviction checks the opt-in: an evicting server is accepted, and
// the store works on it.
func TestAllowEviction(t *testing.T) {
	client := privateClient(t)
	setPolicy(t, client, "volatile-lru")
	s, err := redisstore.New(t.Context(), client, &redisstore.Options{AllowEviction: true})
	if err != nil {
		t.Fatalf("New with AllowEviction on volatile-lru: %v", err)
	}
	useStore(t, s)
}

// TestEvictionUnknown checks a server that will not answer INFO (here an
// ACL user without it): New fails and says how to opt out, and the opt-out
// works.
func TestEvictionUnknown(t *testing.T) {
	admin := privateClient(t)
	ctx := t.Context()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: "noinfo", Password: "pw"})
	t.Cleanup(func() { client.Close() })

	_, err := redisstore.New(ctx, client, nil)
	var ee *redisstore.EvictionError
	if err == nil || errors.As(err, &ee) {
		t.Fatalf("New without INFO = %v; want an error that is not an EvictionError", err)
	}
	for _, want := range []string{"redisstore: ", "INFO", "Options.AllowEviction"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New error %q does not mention %q", err, want)
		}
	}
	s, err := redisstore.New(ctx, client, &redisstore.Options{AllowEviction: true})
	if err != nil {
		t.Fatalf("New with AllowEviction and no INFO: %v", err)
	}
	useStore(t, s)
}

// TestEvictionCheckCancelled checks that the check honours its context.
func TestEvictionCheckCancelled(t *testing.T) {
	client := newClient(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := redisstore.New(ctx, client, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("New with a cancelled context = %v; want context.Canceled", err)
	}
}

// TestClusterEvictionPolicy checks that New reads every master of a Redis
// Cluster: one evicting master is enough to refuse the cluster, since it
// owns a share of the records, and the error names it.
func TestClusterEvictionPolicy(t *testing.T) {
	// A private cluster, whatever REDIS_CLUSTER_ADDRS says: its nodes are
	// reconfigured.
	c, err := testenv.StartRedisCluster(t.TempDir())
	if err != nil {
		testenv.Unavailable(t, "Redis Cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs[:1]})
	t.Cleanup(func() { client.Close() })
	ctx := t.Context()

	if _, err := redisstore.New(ctx, client, nil); err != nil {
		t.Fatalf("New on a cluster left at the default policy: %v", err)
	}

	evicting := c.Addrs[len(c.Addrs)-1] // not the seed the client knows
	node := redis.NewClient(&redis.Options{Addr: evicting})
	t.Cleanup(func() { node.Close() })
	setPolicy(t, node, "allkeys-lru")
	_, err = redisstore.New(ctx, client, nil)
	wantEvictionError(t, err, evicting, "allkeys-lru")
	for _, addr := range c.Addrs[:len(c.Addrs)-1] {
		if strings.Contains(err.Error(), addr) {
			t.Errorf("New error %q names %s, whose policy is noeviction", err, addr)
		}
	}

	s, err := redisstore.New(ctx, client, &redisstore.Options{AllowEviction: true})
	if err != nil {
		t.Fatalf("New with AllowEviction on a cluster with an evicting master: %v", err)
	}
	useStore(t, s)
}
