package redisstore_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
	"github.com/idemgate/idemgate/store/storetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// tick is the short lease and ttl of the conformance suite on the server's
// clock: long enough for a handful of round trips on a loaded machine.
const tick = 120 * time.Millisecond

func TestConformance(t *testing.T) {
	client := newClient(t)
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			return newStore(t, client, &redisstore.Options{Prefix: uniquePrefix(t), TTL: s.TTL})
		},
		RealClock: true,
		Tick:      tick,
	})
}

// newClient returns a client of the test Redis server, closed when t ends.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

// uniquePrefix returns a key prefix no other test uses. It holds no glob
// characters, so cleanups can SCAN for it.
func uniquePrefix(t testing.TB) string {
	t.Helper()
	return "idemgate-test:" + rand.Text() + ":"
}

// newStore returns a store on client and deletes its keys when t ends.
func newStore(t testing.TB, client redis.UniversalClient, opts *redisstore.Options) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteKeys(t, client, opts.Prefix) })
	return s
}

// deleteKeys removes every key under prefix on every master.
func deleteKeys(t testing.TB, client redis.UniversalClient, prefix string) {
	ctx := testenv.Context(t)
	del := func(c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Unlink(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	var err error
	switch c := client.(type) {
	case *redis.Client:
		err = del(c)
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(c) })
	}
	if err != nil {
		t.Logf("deleting test keys under %s: %v", prefix, err)
	}
}
