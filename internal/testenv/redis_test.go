package testenv

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestStartRedis starts a private server the way RedisAddr does when none
// is configured or listening, and talks to it.
func TestStartRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	t.Parallel()
	s := Private(t, "Redis", StartRedis)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if got, err := c.Ping(t.Context()).Result(); err != nil || got != "PONG" {
		t.Errorf("PING = %q, %v; want PONG", got, err)
	}
}
