package datastorestore_test

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
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
		o    datastorestore.Options
	}{
		{"reserved kind", datastorestore.Options{Kind: "__kind__"}},
		{"long kind", datastorestore.Options{Kind: strings.Repeat("k", 1501)}},
		{"kind not UTF-8", datastorestore.Options{Kind: "\xff"}},
		{"namespace with a slash", datastorestore.Options{Namespace: "a/b"}},
		{"reserved namespace", datastorestore.Options{Namespace: "__ns__"}},
		{"long namespace", datastorestore.Options{Namespace: strings.Repeat("n", 101)}},
		{"negative TTL", datastorestore.Options{TTL: -time.Second}},
		{"negative skew margin", datastorestore.Options{SkewMargin: -time.Second}},
		{"skew margin not shorter than the TTL", datastorestore.Options{TTL: time.Minute, SkewMargin: time.Minute}},
		{"skew margin not shorter than the default TTL", datastorestore.Options{SkewMargin: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := datastorestore.New(client, &tc.o)
			if err == nil || !strings.HasPrefix(err.Error(), "datastorestore: ") {
				t.Fatalf("New(%+v) error = %v, want a \"datastorestore: …\" error", tc.o, err)
			}
		})
	}
	if _, err := datastorestore.New(nil, nil); err == nil {
		t.Fatal("New(nil client) must fail")
	}
}

func TestNewKeepsCallerOptions(t *testing.T) {
	client := newClient(t)
	o := datastorestore.Options{Namespace: namespace()}
	want := o
	if _, err := datastorestore.New(client, &o); err != nil {
		t.Fatal(err)
	}
	if o.Kind != want.Kind || o.Namespace != want.Namespace || o.TTL != want.TTL || o.SkewMargin != want.SkewMargin || o.Now != nil {
		t.Fatalf("New changed the caller's options to %+v; defaults belong in the store, not the caller's struct", o)
	}
}

// TestOneWinnerAmongMany races claimers on one key, each from its own
// client (so from its own connections, like separate instances).
func TestOneWinnerAmongMany(t *testing.T) {
	ns := namespace()
	googletest.OneWinnerAmongMany(t, func() googletest.Store {
		st, err := datastorestore.New(newClient(t), &datastorestore.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// TestEntityLayout checks what the package documentation promises about
// the stored entity: its name, its properties, and that none is indexed.
func TestEntityLayout(t *testing.T) {
	client := newClient(t)
	ns := namespace()
	st, err := datastorestore.New(client, &datastorestore.Options{Kind: "Rec", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	cases := append([]googletest.LayoutCase{
		{Key: "a/b"},
		{Key: "."},
		{Key: ".."},
		{Key: "____", Hashed: true},
	}, googletest.LayoutCases...)
	googletest.Layout(t, st, cases, fetchEntity(client, ns))
	t.Run("failures", func(t *testing.T) {
		ns := namespace()
		st, err := datastorestore.New(client, &datastorestore.Options{Kind: "Rec", Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		googletest.FailedLayout(t, st, fetchEntity(client, ns))
	})
}

// fetchEntity returns the properties of the entity of kind Rec named
// name in namespace ns, and fails t when one is indexed.
func fetchEntity(client *datastore.Client, ns string) func(t *testing.T, key, name string) map[string]any {
	return func(t *testing.T, key, name string) map[string]any {
		k := datastore.NameKey("Rec", name, nil)
		k.Namespace = ns
		var props datastore.PropertyList
		if err := client.Get(t.Context(), k, &props); err != nil {
			t.Fatalf("key %.20q: no entity named %.30q: %v", key, name, err)
		}
		fields := make(map[string]any, len(props))
		for _, p := range props {
			if !p.NoIndex {
				t.Errorf("key %.20q: property %q is indexed; no property should be", key, p.Name)
			}
			fields[p.Name] = p.Value
		}
		return fields
	}
}

// TestStrangeEntityIsAnError: an entity the store did not write is
// reported, not overwritten.
func TestStrangeEntityIsAnError(t *testing.T) {
	client := newClient(t)
	ns := namespace()
	st, err := datastorestore.New(client, &datastorestore.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	k := datastore.NameKey("IdemgateRecord", "k", nil)
	k.Namespace = ns
	if _, err := client.Put(t.Context(), k, &datastore.PropertyList{{Name: "state", Value: "PENDING"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err == nil || !strings.Contains(err.Error(), "PENDING") {
		t.Fatalf("Claim over a foreign entity: %v, want an error naming the bad state", err)
	}
}

// TestSkewMargin: a lapsed lease or an expired record is only taken over
// once it is SkewMargin overdue; a released claim is free at once.
func TestSkewMargin(t *testing.T) {
	googletest.SkewMargin(t, storesOn(newClient(t)))
}

func TestBadArguments(t *testing.T) {
	googletest.BadArguments(t, newStore(t, newClient(t), datastorestore.Options{}))
}

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
