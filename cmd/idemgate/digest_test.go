package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

// TestDigestMatchesTheGateway: digest prints the key_digest a gateway with
// HideKeys logs for the key, read from a real delivery's log line.
func TestDigestMatchesTheGateway(t *testing.T) {
	logs := &logtest.Sink{}
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(st, &gateway.Options{HideKeys: true, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Route(&gateway.RouteOptions{Key: func(m *pushenvelope.Message) (string, error) { return "msg:" + m.ID, nil }}).
		Push(func(context.Context, *pushenvelope.Message) error { return nil })
	body := `{"message":{"messageId":"100","data":"aGk="},"subscription":"projects/p/subscriptions/s"}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("push = %d %s", rec.Code, rec.Body)
	}
	var logged string
	for _, r := range logs.Records() {
		if d := r.Attrs["key_digest"]; d != "" {
			logged = d
		}
	}
	if logged == "" {
		t.Fatalf("the gateway logged no key_digest:\n%s", logs.Records())
	}
	if strings.Contains(logs.Records().String(), "msg:100") {
		t.Fatalf("the gateway logged the key under HideKeys:\n%s", logs.Records())
	}
	r := idemgate(t, "", "digest", "msg:100", "other")
	if lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); r.code != exitOK || len(lines) != 2 || lines[0] != logged {
		t.Errorf("digest msg:100 other = %d, %q; want first the gateway's %q", r.code, r.stdout, logged)
	}
	if r := idemgate(t, "", "digest"); r.code != exitUsage {
		t.Errorf("digest without a key = %d, want 2", r.code)
	}
}
