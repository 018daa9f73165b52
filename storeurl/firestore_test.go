package storeurl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/storeurl"
)

func TestOpenFirestore(t *testing.T) {
	useEmulator(t, "FIRESTORE_EMULATOR_HOST", "Firestore emulator", testenv.StartFirestoreEmulator)
	for _, u := range []string{
		"firestore://idemgate-test",
		"firestore://idemgate-test?collection=storeurl_records",
		"firestore://idemgate-test?database=(default)",
		"firestore://",
	} {
		roundTrip(t, u)
	}
	for _, u := range []string{
		"firestore://p?collection=a/b",
		"firestore://p?namespace=x",
		"firestore://p?collection=a&collection=b",
		"firestore://p/path",
	} {
		if _, err := storeurl.Open(t.Context(), u); err == nil || !strings.HasPrefix(err.Error(), "firestore store: ") || !errors.As(err, new(*storeurl.URLError)) {
			t.Errorf("Open(%q) error = %v, want a URLError starting \"firestore store: \"", u, err)
		}
	}
}
