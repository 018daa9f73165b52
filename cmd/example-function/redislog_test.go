package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRedisClientLogsInJSON: go-redis's own lines (its pool failing to
// dial) go through the function's JSON log, not as plain text on stderr.
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
	if err := run(ctx, func(k string) string { return env[k] }, &logs); err == nil {
		t.Fatal("run with an unreachable Redis succeeded")
	}
	var fromRedis int
	for line := range strings.Lines(logs.String()) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
		}
		if l["component"] == "go-redis" {
			fromRedis++
			if l["severity"] != "WARNING" || !strings.Contains(fmt.Sprint(l["message"]), "connection pool") {
				t.Errorf("go-redis line = %s, want a WARNING about its connection pool", line)
			}
		}
	}
	if fromRedis == 0 {
		t.Errorf("no go-redis line in the JSON log:\n%s", logs.String())
	}
}
