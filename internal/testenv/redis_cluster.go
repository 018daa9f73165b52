package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisClusterAddrs returns the seed addresses of a Redis Cluster:
// $REDIS_CLUSTER_ADDRS (comma-separated host:port) if set, else a private
// cluster of three masters started for t alone with [StartRedisCluster] and
// stopped when t ends. Tests must isolate themselves with unique key
// prefixes when the cluster comes from the environment.
func RedisClusterAddrs(t testing.TB) []string {
	t.Helper()
	if v := os.Getenv("REDIS_CLUSTER_ADDRS"); v != "" {
		return strings.Split(v, ",")
	}
	c, err := StartRedisCluster(t.TempDir())
	if err != nil {
		Unavailable(t, "Redis Cluster: set REDIS_CLUSTER_ADDRS or install redis-server and redis-cli (apt install redis-server redis-tools): %v", err)
	}
	t.Cleanup(c.Stop)
	return c.Addrs
}

// RedisCluster is a Redis Cluster started by [StartRedisCluster].
type RedisCluster struct {
	Addrs []string // host:port of each master, in start order
	nodes []*Server
}

// Stop stops every node. It is safe to call more than once.
func (c *RedisCluster) Stop() {
	for _, n := range c.nodes {
		n.Stop()
	}
}

// clusterSize is the number of masters: the fewest redis-cli accepts.
const clusterSize = 3

// StartRedisCluster starts three diskless cluster-enabled redis-server
// processes, each in its own subdirectory of dir and on free ports, joins
// them into one cluster with redis-cli --cluster create (no replicas), and
// waits until every node reports cluster_state:ok. It needs redis-server 7
// or later (for --cluster-port) and redis-cli.
func StartRedisCluster(dir string) (c *RedisCluster, err error) {
	server, err := lookPath("redis-server", "/usr/bin/redis-server")
	if err != nil {
		return nil, err
	}
	cli, err := lookPath("redis-cli", "/usr/bin/redis-cli")
	if err != nil {
		return nil, err
	}
	c = &RedisCluster{}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	// Start the nodes. Each also listens on a cluster bus port, chosen free
	// here rather than left to the port+10000 default.
	for i := range clusterSize {
		nodeDir := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, err
		}
		n, err := startOnFreePort(nodeDir, 10*time.Second, server, func(port int) []string {
			bus, _ := FreePort()
			return []string{
				"--port", itoa(port), "--bind", "127.0.0.1", "--dir", nodeDir,
				"--save", "", "--appendonly", "no",
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-port", itoa(bus), "--cluster-node-timeout", "5000",
			}
		})
		if err != nil {
			return nil, fmt.Errorf("cluster node %d: %w", i, err)
		}
		n.Dir = nodeDir
		c.nodes = append(c.nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}
	// Assign the slots and introduce the nodes to each other.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, tail(out))
	}
	// Wait until every node agrees that all slots are served.
	for _, addr := range c.Addrs {
		if err := waitClusterOK(ctx, cli, addr); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// waitClusterOK polls CLUSTER INFO on addr until it reports cluster_state:ok.
func waitClusterOK(ctx context.Context, cli, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	var last []byte
	for {
		out, err := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "cluster", "info").Output()
		if err == nil && bytes.Contains(out, []byte("cluster_state:ok")) {
			return nil
		}
		last = out
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis cluster node %s not ok: %v: %s", addr, ctx.Err(), tail(last))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
