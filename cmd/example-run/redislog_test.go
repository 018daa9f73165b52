package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/logtest"
)

// lockedBuffer is a log destination safe for go-redis's goroutines.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRedisClientLogsInJSON: go-redis's own lines (its pool failing to
// dial) go through the service's JSON log, not as plain text on stderr.
func TestRedisClientLogsInJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var logs lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := map[string]string{"IDEMGATE_STORE": "redis://" + addr + "/0", "PORT": "0"}
	if err := run(ctx, func(k string) string { return env[k] }, &logs, nil); err == nil {
		t.Fatal("run with an unreachable Redis succeeded")
	}
	logtest.CheckGoRedisJSON(t, logs.String())
}
