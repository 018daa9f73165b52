package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// noEviction is the only maxmemory-policy under which Redis never deletes a
// key before its expiry.
const noEviction = "noeviction"

// EvictionError is New's answer when a server's maxmemory-policy lets Redis
// evict records. Every record carries an expiry, so the volatile-* policies
// evict them as readily as the allkeys-* ones.
type EvictionError struct {
	// Addr is the Redis Cluster master that evicts; empty for a client of
	// one server (or of a Sentinel-managed primary).
	Addr string
	// Policy is the server's maxmemory-policy, for example "volatile-lru".
	Policy string
}

// Error names the policy and the two ways out.
func (e *EvictionError) Error() string {
	return fmt.Sprintf("redisstore: maxmemory-policy is %s%s; Redis may evict idemgate's records and so run work again: "+
		"set maxmemory-policy to noeviction (on Memorystore, in the instance's configuration), "+
		"or set Options.AllowEviction to accept that risk", e.Policy, on(e.Addr))
}

// on is " on addr", or nothing when addr is empty.
func on(addr string) string {
	if addr == "" {
		return ""
	}
	return " on " + addr
}

// errRing refuses a *redis.Ring, whatever its servers' policy.
var errRing = errors.New("redisstore: *redis.Ring is not supported: a Ring moves a key to another shard " +
	"when its shard is marked down, so records vanish from its view and work runs again; " +
	"use a *redis.ClusterClient (Redis Cluster) or a client of one server")

// checkEviction refuses a client whose server may evict records: for a
// Redis Cluster every master must report maxmemory-policy noeviction, since
// any of them may own a record.
func checkEviction(ctx context.Context, client redis.UniversalClient) error {
	cc, ok := client.(*redis.ClusterClient)
	if !ok {
		return checkNode(ctx, client, "")
	}
	var (
		mu   sync.Mutex // guards errs: ForEachMaster calls in parallel
		errs []error
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		err := checkNode(ctx, m, m.Options().Addr)
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return err
	})
	if len(errs) == 0 && err != nil { // the cluster's masters could not be listed
		return fmt.Errorf("redisstore: cannot read the cluster's masters to check their maxmemory-policy: %w", err)
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// checkNode reads one server's maxmemory-policy with INFO memory, which
// Memorystore allows where it refuses CONFIG GET, and refuses any policy but
// noeviction. addr names the server in errors; empty for a lone server.
func checkNode(ctx context.Context, c redis.Cmdable, addr string) error {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return fmt.Errorf("redisstore: cannot read maxmemory-policy%s with INFO memory: %w "+
			"(if the server refuses INFO, make sure its policy is noeviction and set Options.AllowEviction)", on(addr), err)
	}
	policy, ok := infoField(info, "maxmemory_policy")
	if !ok {
		return fmt.Errorf("redisstore: INFO memory%s reports no maxmemory_policy "+
			"(make sure the server never evicts and set Options.AllowEviction)", on(addr))
	}
	if policy != noEviction {
		return &EvictionError{Addr: addr, Policy: policy}
	}
	return nil
}

// infoField returns the value of name in an INFO reply, whose lines are
// "name:value".
func infoField(info, name string) (string, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
