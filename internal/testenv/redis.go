package testenv

import (
	"os"
	"testing"
	"time"
)

// RedisAddr returns the address of a Redis server: $REDIS_ADDR, else
// 127.0.0.1:6379 if listening, else a redis-server started on a free port.
// Tests must isolate themselves with unique key prefixes.
func RedisAddr(t testing.TB) string {
	t.Helper()
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	if Listening("127.0.0.1:6379") {
		return "127.0.0.1:6379"
	}
	s, err := shared("redis", StartRedis)
	if err != nil {
		Unavailable(t, "Redis: set REDIS_ADDR or install redis-server (apt install redis-server): %v", err)
	}
	return s.Addr
}

// StartRedis starts a diskless redis-server on a free port in dir.
func StartRedis(dir string) (*Server, error) {
	bin, err := lookPath("redis-server", "/usr/bin/redis-server")
	if err != nil {
		return nil, err
	}
	return startOnFreePort(dir, 10*time.Second, bin, func(port int) []string {
		return []string{"--port", itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}
	})
}
