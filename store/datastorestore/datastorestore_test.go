package datastorestore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
	"github.com/idemgate/idemgate/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			return newStore(t, client, datastorestore.Options{TTL: s.TTL, Now: s.Now})
		},
	})
}

func TestConformanceRealClock(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			return newStore(t, client, datastorestore.Options{TTL: s.TTL})
		},
		RealClock: true,
		Tick:      250 * time.Millisecond,
	})
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
	const n = 32
	ns := namespace()
	stores := make([]*datastorestore.Store, n)
	for i := range stores {
		st, err := datastorestore.New(newClient(t), &datastorestore.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = st
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		res   = make([]store.Claim, n)
		errs  = make([]error, n)
	)
	for i, st := range stores {
		wg.Go(func() {
			<-start
			res[i], errs[i] = st.Claim(t.Context(), "hot", time.Minute)
		})
	}
	close(start)
	wg.Wait()
	wins := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claimer %d: %v", i, errs[i])
		}
		switch res[i].Status {
		case store.Won:
			wins++
			if res[i].Fence != 1 {
				t.Errorf("winner's fence = %d, want 1", res[i].Fence)
			}
		case store.HeldByOther:
		default:
			t.Errorf("claimer %d: %v, want Won or HeldByOther", i, res[i].Status)
		}
	}
	if wins != 1 {
		t.Fatalf("%d of %d racing claims won, want exactly 1", wins, n)
	}
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
	ctx := t.Context()
	for _, tc := range []struct {
		key    string
		hashed bool
	}{
		{"a/b", false},
		{".", false},
		{"..", false},
		{"ünïcödé 🔑", false},
		{strings.Repeat("x", 1500), false},
		{"__x__", true},
		{"____", true},
		{strings.Repeat("x", 1501), true},
		{strings.Repeat("é", 2048), true},              // 4 KiB
		{"sha256:0000", true},                          // could pass for a hashed name
		{strings.Repeat("é", store.MaxKeyLen/2), true}, // the longest key
	} {
		c, err := st.Claim(ctx, tc.key, time.Minute)
		if err != nil || c.Status != store.Won {
			t.Fatalf("Claim(%.20q) = %v, %v; want Won", tc.key, c.Status, err)
		}
		if ok, err := st.Complete(ctx, c); !ok || err != nil {
			t.Fatalf("Complete(%.20q) = %v, %v; want true", tc.key, ok, err)
		}
		name := tc.key
		if tc.hashed {
			sum := sha256.Sum256([]byte(tc.key))
			name = "sha256:" + hex.EncodeToString(sum[:])
		}
		k := datastore.NameKey("Rec", name, nil)
		k.Namespace = ns
		var props datastore.PropertyList
		if err := client.Get(ctx, k, &props); err != nil {
			t.Fatalf("key %.20q: no entity named %.30q: %v", tc.key, name, err)
		}
		want := map[string]bool{"state": true, "fence": true, "token": true, "leaseUntil": true, "expiresAt": true}
		if tc.hashed {
			want["key"] = true
		}
		for _, p := range props {
			if !p.NoIndex {
				t.Errorf("key %.20q: property %q is indexed; no property should be", tc.key, p.Name)
			}
			if !want[p.Name] {
				t.Errorf("key %.20q: unexpected property %q", tc.key, p.Name)
			}
			delete(want, p.Name)
			switch p.Name {
			case "state":
				if p.Value != "DONE" {
					t.Errorf("state = %v after Complete, want DONE", p.Value)
				}
			case "key":
				if p.Value != tc.key {
					t.Errorf("key property = %.20q, want %.20q", p.Value, tc.key)
				}
			case "expiresAt", "leaseUntil":
				if _, ok := p.Value.(time.Time); !ok {
					t.Errorf("%s is a %T, want a timestamp (a TTL policy needs one)", p.Name, p.Value)
				}
			}
		}
		for name := range want {
			t.Errorf("key %.20q: property %q missing", tc.key, name)
		}
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
	if _, err := st.Claim(t.Context(), "k", time.Minute); err == nil || !strings.Contains(err.Error(), "PENDING") {
		t.Fatalf("Claim over a foreign entity: %v, want an error naming the bad state", err)
	}
}

// TestSkewMargin: a lapsed lease or an expired record is only taken over
// once it is SkewMargin overdue; a released claim is free at once.
func TestSkewMargin(t *testing.T) {
	client := newClient(t)
	var (
		mu  sync.Mutex
		now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	pass := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	const skew = 5 * time.Second
	st := newStore(t, client, datastorestore.Options{TTL: time.Minute, SkewMargin: skew, Now: clock})
	ctx := t.Context()
	claim := func(key string, want store.Status, rule string) store.Claim {
		t.Helper()
		c, err := st.Claim(ctx, key, time.Second)
		if err != nil || c.Status != want {
			t.Fatalf("%s: Claim = %v, %v; want %v", rule, c.Status, err, want)
		}
		return c
	}
	claim("lease", store.Won, "first claim")
	pass(time.Second)
	claim("lease", store.HeldByOther, "a lease lapsed by less than the margin must stay held")
	pass(skew)
	claim("lease", store.Won, "a lease lapsed by the margin must be reclaimable")

	c := claim("released", store.Won, "first claim")
	if err := st.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	claim("released", store.Won, "a released claim must be free at once despite the margin")

	c = claim("done", store.Won, "first claim")
	if ok, err := st.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	pass(time.Minute)
	claim("done", store.AlreadyDone, "a record expired by less than the margin must still suppress duplicates")
	pass(skew)
	if d := claim("done", store.Won, "a record expired by the margin must be reclaimable"); d.Fence != c.Fence+1 {
		t.Fatalf("reclaim after expiry: fence %d, want %d", d.Fence, c.Fence+1)
	}
}

// TestTokenSurvivesRelease: a Claim retried with the token of a claim that
// was released since must not re-affirm the released claim.
func TestTokenSurvivesRelease(t *testing.T) {
	st := newStore(t, newClient(t), datastorestore.Options{})
	ctx := store.WithClaimToken(t.Context(), "tok")
	a, err := st.Claim(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, err := st.Claim(ctx, "k", time.Minute)
	if err != nil || b.Status != store.Won || b.Fence != a.Fence+2 || !b.LeaseUntil.After(a.LeaseUntil.Add(-time.Second)) {
		t.Fatalf("Claim after Release with the same token = %+v, %v; want a fresh win at fence %d", b, err, a.Fence+2)
	}
}

func TestBadArguments(t *testing.T) {
	st := newStore(t, newClient(t), datastorestore.Options{})
	ctx := t.Context()
	if _, err := st.Claim(ctx, "k", 0); err == nil {
		t.Error("Claim with a zero lease must fail")
	}
	c, err := st.Claim(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Extend(ctx, c, -time.Second); err == nil {
		t.Error("Extend with a negative lease must fail")
	}
	if _, err := st.Extend(ctx, store.Claim{Key: "", Fence: 1}, time.Minute); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Extend of an invalid key = %v, want ErrFenced", err)
	}
	if ok, err := st.Complete(ctx, store.Claim{Key: "\x00", Fence: 1}); ok || err != nil {
		t.Errorf("Complete of an invalid key = %v, %v; want false, nil", ok, err)
	}
}
