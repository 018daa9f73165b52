package storeurl_test

import (
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

// redisAddr returns a Redis server for t: $REDIS_ADDR, the local default
// one, or a private one (this package has no TestMain to stop a shared one).
func redisAddr(t *testing.T) string {
	t.Helper()
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	if testenv.Listening("127.0.0.1:6379") {
		return "127.0.0.1:6379"
	}
	return testenv.Private(t, "redis", testenv.StartRedis).Addr
}

// openRedisURL opens rawURL, runs a message and its duplicate under a fresh
// key, checks where the record landed, deletes it and closes the store.
func openRedisURL(t *testing.T, rawURL string, check redis.UniversalClient, wantPrefix string) {
	t.Helper()
	ctx := t.Context()
	o, err := storeurl.Open(ctx, rawURL)
	if err != nil {
		t.Fatalf("Open(%q): %v", rawURL, err)
	}
	key := "storeurl-test-" + rand.Text()
	defer check.Del(ctx, wantPrefix+key)
	c, err := o.Store.Claim(ctx, key, time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("%s: Claim = %v, %v; want Won", rawURL, c.Status, err)
	}
	if ok, err := o.Store.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("%s: Complete = %v, %v; want true", rawURL, ok, err)
	}
	if d, err := o.Store.Claim(ctx, key, time.Minute, store.ClaimOptions{}); err != nil || d.Status != store.AlreadyDone {
		t.Fatalf("%s: second Claim = %v, %v; want AlreadyDone", rawURL, d.Status, err)
	}
	if n, err := check.Exists(ctx, wantPrefix+key).Result(); err != nil || n != 1 {
		t.Errorf("%s: the record is not at %s%s (EXISTS = %d, %v)", rawURL, wantPrefix, key, n, err)
	}
	if o.Name == "" {
		t.Errorf("%s: Opened.Name is empty", rawURL)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("%s: Close: %v", rawURL, err)
	}
	if _, err := o.Store.Claim(ctx, key, time.Minute, store.ClaimOptions{}); err == nil {
		t.Errorf("%s: Claim after Close succeeded; Close must close the client", rawURL)
	}
}

func TestOpenRedis(t *testing.T) {
	addr := redisAddr(t)
	check := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { check.Close() })
	for _, tt := range []struct{ url, prefix string }{
		{"redis://" + addr, "idemgate:"},
		{"redis://" + addr + "/0?prefix=storeurl:&ttl=2h", "storeurl:"},
		{"redis://" + addr + "?dial_timeout=3s&prefix=opts:", "opts:"},
	} {
		openRedisURL(t, tt.url, check, tt.prefix)
	}
}

func TestOpenRedisCluster(t *testing.T) {
	addrs := testenv.RedisClusterAddrs(t)
	check := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { check.Close() })
	openRedisURL(t, "redis+cluster://"+strings.Join(addrs, ",")+"?prefix=cluster:&ttl=1h", check, "cluster:")
	openRedisURL(t, "redis+cluster://"+addrs[0], check, "idemgate:")
}

func TestOpenRedisErrors(t *testing.T) {
	addr := redisAddr(t)
	for _, tt := range []struct{ url, want string }{
		{"redis://" + addr + "?ttl=soon", "parameter ttl"},
		{"redis://" + addr + "?ttl=-1m", "must be positive"},
		{"redis://" + addr + "?prefix=a&prefix=b", `"prefix" given 2 times`},
		{"redis://" + addr + "?allow_eviction=maybe", "parameter allow_eviction"},
		{"redis://" + addr + "?allow_eviction=1&allow_eviction=0", `"allow_eviction" given 2 times`},
		{"redis://" + addr + "?no_such_option=1", "no_such_option"},
		{"redis+cluster://" + addr + "/2", "no database number"},
		{"redis://user:s3cret@127.0.0.1:1?max_retries=-1&dial_timeout=1s", "cannot reach"},
	} {
		t.Run(tt.url, func(t *testing.T) {
			o, err := storeurl.Open(t.Context(), tt.url)
			if err == nil {
				o.Close()
				t.Fatalf("Open(%q) = nil error, want one mentioning %q", tt.url, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open(%q) error = %q, want it to mention %q", tt.url, err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open error %q reveals the password", err)
			}
		})
	}
}

// TestOpenRedisEviction checks that a Redis that may evict records is
// refused with the URL's way out in the message, and accepted with it. The
// server is private: its policy is changed with CONFIG SET.
func TestOpenRedisEviction(t *testing.T) {
	addr := testenv.Private(t, "redis", testenv.StartRedis).Addr
	check := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { check.Close() })
	if err := check.ConfigSet(t.Context(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"redis://" + addr, "redis://" + addr + "?allow_eviction=false"} {
		o, err := storeurl.Open(t.Context(), url)
		if err == nil {
			o.Close()
			t.Fatalf("Open(%q) on maxmemory-policy volatile-lru = nil error, want a refusal", url)
		}
		for _, want := range []string{"volatile-lru", "allow_eviction=true"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%q) error = %q, want it to mention %q", url, err, want)
			}
		}
	}
	openRedisURL(t, "redis://"+addr+"?allow_eviction=true&prefix=evicting:", check, "evicting:")

	// A user the server denies INFO gets the same way out.
	if err := check.Do(t.Context(), "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	url := "redis://noinfo:pw@" + addr
	o, err := storeurl.Open(t.Context(), url)
	if err == nil {
		o.Close()
		t.Fatal("Open as a user denied INFO = nil error, want one")
	}
	for _, want := range []string{"INFO", "allow_eviction=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open as a user denied INFO: error = %q, want it to mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), ":pw@") {
		t.Errorf("Open error %q reveals the password", err)
	}
	openRedisURL(t, url+"?allow_eviction=true&prefix=noinfo:", check, "noinfo:")
}
