package datastorestore_test

import (
	"testing"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/store/datastorestore"
)

// TestUnfingerprintedEntities: entities written before the store kept
// fingerprints have no fingerprint property; they read as keeping none,
// with no migration.
func TestUnfingerprintedEntities(t *testing.T) {
	client := newClient(t)
	ns := namespace()
	st, err := datastorestore.New(client, &datastorestore.Options{Kind: "Rec", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	googletest.Unfingerprinted(t, st, func(t *testing.T, key string, fields map[string]any) {
		k := datastore.NameKey("Rec", key, nil)
		k.Namespace = ns
		var props datastore.PropertyList
		for name, v := range fields {
			props = append(props, datastore.Property{Name: name, Value: v, NoIndex: true})
		}
		if _, err := client.Put(t.Context(), k, &props); err != nil {
			t.Fatalf("writing an old entity: %v", err)
		}
	})
}
