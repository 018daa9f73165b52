package firestorestore_test

import (
	"testing"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/store/firestorestore"
)

// TestUnfingerprintedDocuments: documents written before the store kept
// fingerprints have no fingerprint field; they read as keeping none, with
// no migration.
func TestUnfingerprintedDocuments(t *testing.T) {
	client := newClient(t)
	coll := collection()
	st, err := firestorestore.New(client, &firestorestore.Options{Collection: coll})
	if err != nil {
		t.Fatal(err)
	}
	googletest.Unfingerprinted(t, st, func(t *testing.T, key string, fields map[string]any) {
		if _, err := client.Collection(coll).Doc(key).Set(t.Context(), fields); err != nil {
			t.Fatalf("writing an old document: %v", err)
		}
	})
}
