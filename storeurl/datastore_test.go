package storeurl_test

import (
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

// useEmulator points env at an emulator for the duration of t: the one it
// already names, else one started for t alone (this package has no
// TestMain to stop a shared one).
func useEmulator(t *testing.T, env, what string, start func(dir string) (*testenv.Server, error)) {
	t.Helper()
	host := os.Getenv(env)
	if host == "" {
		host = testenv.Private(t, what, start).Addr
	}
	t.Setenv(env, host)
}

// roundTrip runs one message and its duplicate through the store at
// rawURL, then closes it.
func roundTrip(t *testing.T, rawURL string) {
	t.Helper()
	o, err := storeurl.Open(t.Context(), rawURL)
	if err != nil {
		t.Fatalf("Open(%q): %v", rawURL, err)
	}
	key := rand.Text()
	c, err := o.Store.Claim(t.Context(), key, time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("%s: Claim = %v, %v; want Won", rawURL, c.Status, err)
	}
	if ok, err := o.Store.Complete(t.Context(), c); !ok || err != nil {
		t.Fatalf("%s: Complete = %v, %v; want true", rawURL, ok, err)
	}
	if d, err := o.Store.Claim(t.Context(), key, time.Minute, store.ClaimOptions{}); err != nil || d.Status != store.AlreadyDone {
		t.Fatalf("%s: second Claim = %v, %v; want AlreadyDone", rawURL, d.Status, err)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("%s: Close: %v", rawURL, err)
	}
}

func TestOpenDatastore(t *testing.T) {
	useEmulator(t, "DATASTORE_EMULATOR_HOST", "Datastore emulator", testenv.StartDatastoreEmulator)
	for _, u := range []string{
		"datastore://idemgate-test",
		"datastore://idemgate-test?namespace=storeurl&kind=Rec",
		"datastore://",
	} {
		roundTrip(t, u)
	}
	for _, u := range []string{
		"datastore://p?namespace=a/b",
		"datastore://p?kind=__k__",
		"datastore://p?collection=x",
		"datastore://p?kind=a&kind=b",
		"datastore://p/path",
		"datastore://user@p",
		"datastore://p:8081",
	} {
		if _, err := storeurl.Open(t.Context(), u); err == nil || !strings.HasPrefix(err.Error(), "datastore store: ") || !errors.As(err, new(*storeurl.URLError)) {
			t.Errorf("Open(%q) error = %v, want a URLError starting \"datastore store: \"", u, err)
		}
	}
}
