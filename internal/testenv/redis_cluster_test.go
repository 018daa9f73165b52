package testenv

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestStartRedisCluster starts a cluster, checks that every master serves
// a share of the slots and that keys spread over them, then stops it.
func TestStartRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three redis-server processes")
	}
	t.Parallel()
	c, err := StartRedisCluster(t.TempDir())
	if err != nil {
		Unavailable(t, "Redis Cluster: %v", err)
	}
	defer c.Stop()
	if len(c.Addrs) != clusterSize {
		t.Fatalf("Addrs = %v, want %d masters", c.Addrs, clusterSize)
	}
	ctx := t.Context()
	for _, addr := range c.Addrs {
		node := redis.NewClient(&redis.Options{Addr: addr})
		info, err := node.ClusterInfo(ctx).Result()
		node.Close()
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(clusterSize)) {
			t.Errorf("CLUSTER INFO on %s = %q, %v; want state ok with %d known nodes", addr, info, err, clusterSize)
		}
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs[:1]})
	defer client.Close()
	for i := range 30 {
		if err := client.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var used atomic.Int32 // ForEachMaster calls in parallel
	err = client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if n > 0 {
			used.Add(1)
		}
		return err
	})
	if err != nil || used.Load() != clusterSize {
		t.Errorf("keys landed on %d masters (%v), want all %d", used.Load(), err, clusterSize)
	}

	c.Stop()
	for _, addr := range c.Addrs {
		if Listening(addr) {
			t.Errorf("%s still listening after Stop", addr)
		}
	}
}
