package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// serveTestEndpoint is a tiny endpoint on $PORT that acks every delivery
// and calls $SUPPLIER_URL once per delivery with the messageId as key. It
// exits on SIGTERM.
func serveTestEndpoint() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Addr: "127.0.0.1:" + os.Getenv("PORT"), Handler: mux}
	go srv.ListenAndServe()
	<-ctx.Done()
	srv.Close()
}

func TestSpawn(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PUSHSTORM_TEST_ENDPOINT", "1")
	var out bytes.Buffer
	var errs lockedBuffer // the child writes to it too
	code := run(t.Context(), []string{"-spawn", exe, "-path", "/orders", "-n", "20", "-dup", "0", "-concurrent", "0", "-republish", "0"}, &out, &errs)
	if code != exitOK {
		t.Fatalf("run with -spawn = %d\n%s\n%s", code, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "/orders") || !strings.Contains(errs.String(), "spawned") {
		t.Fatalf("report does not show the spawned endpoint:\n%s\n%s", out.String(), errs.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestSpawnFailsClearly(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run(t.Context(), []string{"-spawn", "/nonexistent/endpoint"}, &out, &errs); code != exitFail {
		t.Fatalf("run with a missing command = %d, want %d", code, exitFail)
	}
	if !strings.Contains(errs.String(), "-spawn") {
		t.Fatalf("stderr = %q, want a -spawn error", errs.String())
	}
}
