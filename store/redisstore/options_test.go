package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

func TestNewRejectsBadConfig(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { client.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, HeartbeatFrequency: time.Hour})
	t.Cleanup(func() { ring.Close() })
	tests := []struct {
		name   string
		client redis.UniversalClient
		opts   *redisstore.Options
		want   string
	}{
		{"nil client", nil, nil, "nil client"},
		{"negative TTL", client, &redisstore.Options{TTL: -time.Second}, "negative TTL"},
		{"brace in prefix with HashTag", client, &redisstore.Options{Prefix: "app{x}:", HashTag: true}, "contains '{'"},
		// A Ring re-shards keys when a shard is marked down, whatever the
		// eviction policy, so AllowEviction does not let it in.
		{"ring", ring, nil, "*redis.Ring is not supported"},
		{"ring with AllowEviction", ring, &redisstore.Options{AllowEviction: true}, "*redis.Ring is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := redisstore.New(t.Context(), tt.client, tt.opts)
			if err == nil {
				t.Fatalf("New = %v, nil; want an error", s)
			}
			if !strings.HasPrefix(err.Error(), "redisstore: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %q, want \"redisstore: …%s…\"", err, tt.want)
			}
		})
	}
}

func TestNewDoesNotMutateOptions(t *testing.T) {
	client := newClient(t)
	opts := &redisstore.Options{}
	if _, err := redisstore.New(t.Context(), client, opts); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&redisstore.Options{}, opts); diff != "" {
		t.Errorf("New changed the caller's options (-want +got):\n%s", diff)
	}
	if _, err := redisstore.New(t.Context(), client, nil); err != nil {
		t.Errorf("New with nil options: %v", err)
	}
}

// TestKeyNames pins the Redis key of a record with and without HashTag.
func TestKeyNames(t *testing.T) {
	client := newClient(t)
	ctx := t.Context()
	for _, tt := range []struct {
		name    string
		hashTag bool
		key     string
		want    string // after the prefix
	}{
		{"plain", false, "order-42", "order-42"},
		{"plain keeps a tag in the key", false, "{tenant}:order-42", "{tenant}:order-42"},
		{"hash tag", true, "order-42", "{order-42}"},
		{"hash tag around a brace", true, "a}b", "{a}b}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prefix := uniquePrefix(t)
			s := newStore(t, client, &redisstore.Options{Prefix: prefix, HashTag: tt.hashTag})
			if _, err := s.Claim(ctx, tt.key, time.Minute, store.ClaimOptions{}); err != nil {
				t.Fatal(err)
			}
			if n, err := client.Exists(ctx, prefix+tt.want).Result(); err != nil || n != 1 {
				t.Errorf("EXISTS %s = %d, %v; want the record there", prefix+tt.want, n, err)
			}
		})
	}
}

func TestDefaultPrefix(t *testing.T) {
	client := newClient(t)
	ctx := t.Context()
	s, err := redisstore.New(t.Context(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := "default-prefix-" + uniquePrefix(t)
	t.Cleanup(func() { client.Del(context.Background(), "idemgate:"+key) }) // t.Context is done by then
	if _, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Exists(ctx, "idemgate:"+key).Result(); err != nil || n != 1 {
		t.Errorf("EXISTS idemgate:%s = %d, %v; want the record under the default prefix", key, n, err)
	}
}

func TestBadLease(t *testing.T) {
	client := newClient(t)
	s := newStore(t, client, &redisstore.Options{Prefix: uniquePrefix(t)})
	ctx := t.Context()
	won, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lease := range []time.Duration{0, -time.Second, time.Millisecond - 1} {
		if c, err := s.Claim(ctx, "j", lease, store.ClaimOptions{}); err == nil {
			t.Errorf("Claim with lease %v = %v, nil; want an error", lease, c.Status)
		}
		if _, err := s.Extend(ctx, won, lease); err == nil || errors.Is(err, store.ErrFenced) {
			t.Errorf("Extend with lease %v = %v; want an error that is not ErrFenced", lease, err)
		}
	}
	if c, err := s.Claim(ctx, "j", time.Millisecond+1, store.ClaimOptions{}); err != nil || c.Status != store.Won {
		t.Errorf("Claim with a lease just over 1ms = %v, %v; want Won", c.Status, err)
	}
}

// TestForeignValue checks that a key holding something other than a record
// makes every operation fail rather than guess.
func TestForeignValue(t *testing.T) {
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix})
	ctx := t.Context()
	if err := client.Set(ctx, prefix+"str", "hello", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(ctx, prefix+"hash", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	// A fingerprinted layout whose fingerprint is cut short.
	if err := client.Set(ctx, prefix+"cut", "c1:2:3:40:short", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"str", "hash", "cut"} {
		c := store.Claim{Key: key, Status: store.Won, Fence: 1, Token: "t"}
		if got, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{}); err == nil {
			t.Errorf("Claim of a foreign %s value = %v, nil; want an error", key, got.Status)
		}
		if ok, err := s.Complete(ctx, c); err == nil {
			t.Errorf("Complete of a foreign %s value = %v, nil; want an error", key, ok)
		}
		if err := s.Release(ctx, c); err == nil {
			t.Errorf("Release of a foreign %s value = nil; want an error", key)
		}
		if _, err := s.Extend(ctx, c, time.Minute); err == nil || errors.Is(err, store.ErrFenced) {
			t.Errorf("Extend of a foreign %s value = %v; want an error that is not ErrFenced", key, err)
		}
	}
	if v, _ := client.Get(ctx, prefix+"str").Result(); v != "hello" {
		t.Errorf("the foreign value was changed to %q", v)
	}
}
