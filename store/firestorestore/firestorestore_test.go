package firestorestore_test

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	googletest.Conformance(t, storesOn(client), inTx(client), deleteRecord)
}

func TestConformanceRealClock(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	googletest.ConformanceRealClock(t, storesOn(client), inTx(client), deleteRecord)
}

func TestNewRejectsBadOptions(t *testing.T) {
	client := newClient(t)
	for _, tc := range []struct {
		name string
		o    firestorestore.Options
	}{
		{"document path", firestorestore.Options{Collection: "a/b"}},
		{"empty segment", firestorestore.Options{Collection: "a//c"}},
		{"dot", firestorestore.Options{Collection: "."}},
		{"dot dot segment", firestorestore.Options{Collection: "a/../c"}},
		{"reserved", firestorestore.Options{Collection: "__c__"}},
		{"long", firestorestore.Options{Collection: strings.Repeat("c", 1501)}},
		{"not UTF-8", firestorestore.Options{Collection: "\xff"}},
		{"negative TTL", firestorestore.Options{TTL: -time.Second}},
		{"negative skew margin", firestorestore.Options{SkewMargin: -time.Second}},
		{"skew margin not shorter than the TTL", firestorestore.Options{TTL: time.Minute, SkewMargin: time.Minute}},
		{"skew margin not shorter than the default TTL", firestorestore.Options{SkewMargin: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := firestorestore.New(client, &tc.o)
			if err == nil || !strings.HasPrefix(err.Error(), "firestorestore: ") {
				t.Fatalf("New(%+v) error = %v, want a \"firestorestore: …\" error", tc.o, err)
			}
		})
	}
	if _, err := firestorestore.New(nil, nil); err == nil {
		t.Fatal("New(nil client) must fail")
	}
	if _, err := firestorestore.New(client, &firestorestore.Options{Collection: "tenants/acme/idemgate"}); err != nil {
		t.Fatalf("New with a nested collection: %v", err)
	}
}

func TestNewKeepsCallerOptions(t *testing.T) {
	o := firestorestore.Options{}
	if _, err := firestorestore.New(newClient(t), &o); err != nil {
		t.Fatal(err)
	}
	if o.Collection != "" || o.TTL != 0 || o.SkewMargin != 0 || o.Now != nil {
		t.Fatalf("New changed the caller's options to %+v; defaults belong in the store, not the caller's struct", o)
	}
}

// TestOneWinnerAmongMany races claimers on one key, each from its own
// client (so from its own connection, like separate instances).
func TestOneWinnerAmongMany(t *testing.T) {
	coll := collection()
	googletest.OneWinnerAmongMany(t, func() googletest.Store {
		st, err := firestorestore.New(newClient(t), &firestorestore.Options{Collection: coll})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// TestDocumentLayout checks what the package documentation promises about
// the stored document: its ID and its fields.
func TestDocumentLayout(t *testing.T) {
	client := newClient(t)
	coll := collection()
	st, err := firestorestore.New(client, &firestorestore.Options{Collection: coll})
	if err != nil {
		t.Fatal(err)
	}
	cases := append([]googletest.LayoutCase{
		{Key: "1234567890"},
		{Key: "..."},
		{Key: "a/b", Hashed: true},
		{Key: ".", Hashed: true},
		{Key: "..", Hashed: true},
	}, googletest.LayoutCases...)
	googletest.Layout(t, st, cases, fetchDocument(client, coll))
	t.Run("failures", func(t *testing.T) {
		coll := collection()
		st, err := firestorestore.New(client, &firestorestore.Options{Collection: coll})
		if err != nil {
			t.Fatal(err)
		}
		googletest.FailedLayout(t, st, fetchDocument(client, coll))
	})
}

// fetchDocument returns the fields of the document id in coll.
func fetchDocument(client *firestore.Client, coll string) func(t *testing.T, key, id string) map[string]any {
	return func(t *testing.T, key, id string) map[string]any {
		snap, err := client.Collection(coll).Doc(id).Get(t.Context())
		if err != nil {
			t.Fatalf("key %.20q: no document %.30q: %v", key, id, err)
		}
		return snap.Data()
	}
}

// TestStrangeDocumentIsAnError: a document the store did not write is
// reported, not overwritten.
func TestStrangeDocumentIsAnError(t *testing.T) {
	client := newClient(t)
	coll := collection()
	st, err := firestorestore.New(client, &firestorestore.Options{Collection: coll})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Collection(coll).Doc("k").Set(t.Context(), map[string]any{"state": "PENDING"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err == nil || !strings.Contains(err.Error(), "PENDING") {
		t.Fatalf("Claim over a foreign document: %v, want an error naming the bad state", err)
	}
}

// TestSkewMargin: a lapsed lease or an expired record is only taken over
// once it is SkewMargin overdue; a released claim is free at once.
func TestSkewMargin(t *testing.T) {
	googletest.SkewMargin(t, storesOn(newClient(t)))
}

func TestBadArguments(t *testing.T) {
	googletest.BadArguments(t, newStore(t, newClient(t), firestorestore.Options{}))
}

// TestNestedCollection: records may live below a document.
func TestNestedCollection(t *testing.T) {
	client := newClient(t)
	path := collection() + "/tenant/records"
	st, err := firestorestore.New(client, &firestorestore.Options{Collection: path})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := st.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.Won {
		t.Fatalf("Claim = %v, %v", c.Status, err)
	}
	if _, err := client.Collection(path).Doc("k").Get(t.Context()); err != nil {
		t.Fatalf("the record is not at %s/k: %v", path, err)
	}
}

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
