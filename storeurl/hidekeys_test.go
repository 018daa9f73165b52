package storeurl_test

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/storeurl"
)

// TestHideKeysOnEveryStore: with HideKeys, no log line of the gateway holds
// any piece of a long key, on any store, when the store's errors name it
// (store.QuoteKey cuts a key over 64 bytes, so replacing the whole key
// alone left its first 64 bytes in the line). The work closes the store's
// client before it fails: recording the failure fails, then the release.
func TestHideKeysOnEveryStore(t *testing.T) {
	useEmulator(t, "DATASTORE_EMULATOR_HOST", "Datastore emulator", testenv.StartDatastoreEmulator)
	useEmulator(t, "FIRESTORE_EMULATOR_HOST", "Firestore emulator", testenv.StartFirestoreEmulator)
	// 200 bytes, shaped like personal data, with quotes that %q escapes.
	key := strings.Repeat(`mail:"alice.smith"@example.com/`, 7)[:200]
	name := func() string { return "hide_" + strings.ToLower(rand.Text()[:12]) }
	for _, tc := range []struct{ name, url string }{
		{"Redis", "redis://" + testenv.RedisAddr(t) + "/0?prefix=" + name() + ":"},
		{"PostgreSQL", withTable(testenv.PostgresDSN(t), name())},
		{"MariaDB", withTable("mysql://"+testenv.MySQLDSN(t), name())},
		{"SQLite", "sqlite://" + filepath.Join(t.TempDir(), "h.db")},
		{"Datastore", "datastore://idemgate-test?namespace=" + name()},
		{"Firestore", "firestore://idemgate-test?collection=" + name()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := storeurl.Open(t.Context(), tc.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.url, err)
			}
			defer o.Close()
			logs := &logtest.Sink{}
			g, err := gateway.New(o.Store, &gateway.Options{Logger: logs.Logger(), HideKeys: true, MaxAttempts: 3})
			if err != nil {
				t.Fatal(err)
			}
			boom := errors.New("supplier down")
			if err := g.Lock(t.Context(), key, func(ctx context.Context) error {
				o.Close()
				return boom
			}); !errors.Is(err, boom) {
				t.Fatalf("Lock = %v, want the work's error", err)
			}
			recorded := false
			for _, r := range logs.Records() {
				if strings.Contains(r.Message, "recording the failure failed") {
					recorded = true
				}
				if line := r.String(); strings.Contains(line, "alice") {
					t.Errorf("a log line holds part of the key under HideKeys:\n%s", line)
				}
			}
			if !recorded {
				t.Errorf("no line says that recording the failure failed; the case tested nothing:\n%s", logs.Records())
			}
		})
	}
}

// withTable adds table=name to the query of a database URL.
func withTable(rawURL, name string) string {
	if strings.Contains(rawURL, "?") {
		return rawURL + "&table=" + name
	}
	return rawURL + "?table=" + name
}
