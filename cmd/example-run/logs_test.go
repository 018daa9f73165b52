package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// jsonLines decodes out, which must be JSON lines only.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a line that is not JSON: %q (%v)", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// A start-up failure is a JSON line in the service's format, even when the
// refused setting is the log level itself.
func TestExampleRunStartupFailureIsJSON(t *testing.T) {
	for env, want := range map[string]string{"IDEMGATE_STORE": "nosuch", "LOG_LEVEL": "LOG_LEVEL"} {
		var out lockedBuffer
		code := runMain(t.Context(), func(k string) string {
			if k == env {
				return "nosuch://x"
			}
			return ""
		}, &out)
		lines := jsonLines(t, out.String())
		last := lines[len(lines)-1]
		if code != 1 || last["severity"] != "ERROR" || last["message"] != "example-run failed" || !strings.Contains(last["error"].(string), want) {
			t.Errorf("%s refused: exit %d, last line %v; want 1 and an ERROR line naming %q", env, code, last, want)
		}
	}
}

// serveLogged runs example-run on memory:// with its log in out until the
// test ends, and returns its base URL.
func serveLogged(t *testing.T, out *lockedBuffer) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, errc := make(chan string, 1), make(chan error, 1)
	env := map[string]string{"PORT": "0", "IDEMGATE_STORE": "memory://"}
	go func() { errc <- run(ctx, func(k string) string { return env[k] }, out, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() { cancel(); <-errc })
	return "http://" + strings.Replace(addr, "[::]", "127.0.0.1", 1)
}

// On memory:// the service says at start that it must run alone.
func TestExampleRunMemoryWarnsOneInstance(t *testing.T) {
	var out lockedBuffer
	serveLogged(t, &out)
	for _, l := range jsonLines(t, out.String()) {
		if l["severity"] == "WARNING" && strings.Contains(l["message"].(string), "one instance only") {
			return
		}
	}
	t.Errorf("no WARNING about one instance in:\n%s", out.String())
}

// POST /ledger on a store that is not SQL answers 501 and says so in the
// log, with the route and the message id: each such delivery ends in the
// dead-letter topic.
func TestExampleRunLedgerWithoutSQLIsLogged(t *testing.T) {
	var out lockedBuffer
	base := serveLogged(t, &out)
	if code := post(t, base+"/ledger", pushBody("l-1", nil)); code != http.StatusNotImplemented {
		t.Fatalf("POST /ledger on memory:// = %d, want 501", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, l := range jsonLines(t, out.String()) {
			if l["severity"] == "ERROR" && strings.Contains(l["message"].(string), "POST /ledger needs a SQL store") &&
				l["message_id"] == "l-1" && l["path"] == "/ledger" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ERROR line for the 501 in:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a real condition, with a deadline
	}
}
