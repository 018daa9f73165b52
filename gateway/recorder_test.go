package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/store/memstore"
)

// A held answer keeps its status and a bounded prefix of its body: a
// handler writing 64 MiB neither grows memory by that much nor changes the
// verdict, and what reaches the client is the prefix.
func TestHeldAnswerIsBounded(t *testing.T) {
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(st, &Options{NoRenew: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	const total = 64 << 20
	held := -1
	h := g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "67108864")
		w.WriteHeader(http.StatusAccepted)
		for range total / len(chunk) {
			if n, err := w.Write(chunk); n != len(chunk) || err != nil {
				t.Errorf("Write = %d, %v; want the whole chunk taken", n, err)
				return
			}
		}
		held = len(w.(*recorder).body)
	}))
	envelope := func(id string) io.Reader {
		return strings.NewReader(`{"message":{"messageId":"` + id + `","data":""},"subscription":"projects/p/subscriptions/s"}`)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", envelope("1")))
	runtime.ReadMemStats(&after)
	if held < 0 || held > maxHeldBody {
		t.Fatalf("the recorder held %d bytes of a %d-byte answer, want at most %d", held, total, maxHeldBody)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("serving a %d-byte answer allocated %d bytes", total, grew)
	}
	if rec.Code != http.StatusAccepted || rec.Body.Len() != maxHeldBody {
		t.Fatalf("answer: %d with %d bytes, want 202 with the %d-byte prefix", rec.Code, rec.Body.Len(), maxHeldBody)
	}

	// Over a real connection the prefix is a whole answer: the handler's
	// Content-Length no longer holds and is not sent.
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL, "application/json", envelope("2"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusAccepted || len(b) != maxHeldBody {
		t.Fatalf("over HTTP: %d, %d bytes, %v; want 202 with the %d-byte prefix read whole", resp.StatusCode, len(b), err, maxHeldBody)
	}
}
