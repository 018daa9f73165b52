package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
	"github.com/idemgate/idemgate/store/storetest"
)

// TestClusterConformance runs the whole suite on a three-master Redis
// Cluster through redis.ClusterClient: records spread over the slots of
// every node, and MOVED redirects and per-node script caches are the
// client's business.
func TestClusterConformance(t *testing.T) {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(t)})
	t.Cleanup(func() { client.Close() })
	trackKeys(t, client)
	for _, hashTag := range []bool{false, true} {
		name := "Plain"
		if hashTag {
			name = "HashTag"
		}
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, storetest.Config{
				NewStore: func(t testing.TB, s storetest.Setup) store.Store {
					return newStore(t, client, &redisstore.Options{Prefix: uniquePrefix(t), HashTag: hashTag, TTL: s.TTL})
				},
				RealClock: true,
				Tick:      tick,
				Delete:    deleteRecord,
			})
		})
	}
}
