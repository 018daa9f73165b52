package googletest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// OneWinnerAmongMany races 32 claimers on one key, each store from
// newStore, which must give a store on a client of its own (so on
// connections of its own, like separate instances) over the same records.
func OneWinnerAmongMany(t *testing.T, newStore func() Store) {
	const n = 32
	stores := make([]Store, n)
	for i := range stores {
		stores[i] = newStore()
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
			res[i], errs[i] = st.Claim(t.Context(), "hot", time.Minute, store.ClaimOptions{})
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
			if res[i].Fence <= 0 {
				t.Errorf("winner's fence = %d, want a positive fence", res[i].Fence)
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

// SkewMargin checks that a lapsed lease or an expired record is only
// taken over once it is SkewMargin overdue, and that a released claim is
// free at once.
func SkewMargin(t *testing.T, newStore NewStore) {
	var (
		mu  sync.Mutex // guards now
		now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	pass := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	const skew = 5 * time.Second
	st := newStore(t, Options{TTL: time.Minute, SkewMargin: skew, Now: clock})
	ctx := t.Context()
	claim := func(key string, want store.Status, rule string) store.Claim {
		t.Helper()
		c, err := st.Claim(ctx, key, time.Second, store.ClaimOptions{})
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
	if d := claim("done", store.Won, "a record expired by the margin must be reclaimable"); d.Fence <= c.Fence {
		t.Fatalf("reclaim after expiry: fence %d, want above %d", d.Fence, c.Fence)
	}
}

// BadArguments checks what each operation does with arguments no record
// can answer. st must be fresh.
func BadArguments(t *testing.T, st Store) {
	ctx := t.Context()
	if _, err := st.Claim(ctx, "k", 0, store.ClaimOptions{}); err == nil {
		t.Error("Claim with a zero lease must fail")
	}
	c, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Extend(ctx, c, -time.Second); err == nil {
		t.Error("Extend with a negative lease must fail")
	}
	if _, err := st.Extend(ctx, store.Claim{Key: "", Status: store.Won, Fence: 1}, time.Minute); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Extend of an invalid key = %v, want ErrFenced", err)
	}
	if ok, err := st.Complete(ctx, store.Claim{Key: "\x00", Status: store.Won, Fence: 1}); ok || err != nil {
		t.Errorf("Complete of an invalid key = %v, %v; want false, nil", ok, err)
	}
}

// LayoutCase is a key, and whether the store must name its record with
// the key's hash rather than the key itself.
type LayoutCase struct {
	Key    string
	Hashed bool
}

// LayoutCases are keys both stores name after their hash: reserved
// names, names too long for either backend, and keys that could pass for
// a hashed name.
var LayoutCases = []LayoutCase{
	{"__x__", true},
	{strings.Repeat("x", 1501), true},
	{strings.Repeat("é", 2048), true},              // 4 KiB
	{"sha256:0000", true},                          // could pass for a hashed name
	{strings.Repeat("é", store.MaxKeyLen/2), true}, // the longest key
	{"ünïcödé 🔑", false},
	{strings.Repeat("x", 1500), false},
}

// Layout checks what the stores' documentation promises about a stored
// record: its name (the key, or "sha256:" and the hex SHA-256 of the
// key), its fields, and their types. It claims each key in cases on st
// with a full-size fingerprint and completes it, then reads the record
// back with fetch, which returns its fields by name (or fails t, naming
// what it could not read).
func Layout(t *testing.T, st Store, cases []LayoutCase, fetch func(t *testing.T, key, name string) map[string]any) {
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: Fingerprint}
	for _, tc := range cases {
		c, err := st.Claim(ctx, tc.Key, time.Minute, opts)
		if err != nil || c.Status != store.Won {
			t.Fatalf("Claim(%.20q) = %v, %v; want Won", tc.Key, c.Status, err)
		}
		if ok, err := st.Complete(ctx, c); !ok || err != nil {
			t.Fatalf("Complete(%.20q) = %v, %v; want true", tc.Key, ok, err)
		}
		name := tc.Key
		if tc.Hashed {
			sum := sha256.Sum256([]byte(tc.Key))
			name = "sha256:" + hex.EncodeToString(sum[:])
		}
		want := map[string]bool{"state": true, "fence": true, "token": true, "leaseUntil": true, "expiresAt": true, "fingerprint": true}
		if tc.Hashed {
			want["key"] = true
		}
		for field, v := range fetch(t, tc.Key, name) {
			if !want[field] {
				t.Errorf("key %.20q: unexpected field %q", tc.Key, field)
			}
			delete(want, field)
			switch field {
			case "state":
				if v != "DONE" {
					t.Errorf("state = %v after Complete, want DONE", v)
				}
			case "key":
				if v != tc.Key {
					t.Errorf("key field = %.20q, want %.20q", v, tc.Key)
				}
			case "fingerprint":
				if b, ok := v.([]byte); !ok || !bytes.Equal(b, Fingerprint) {
					t.Errorf("fingerprint = %#v, want the Claim's %d bytes", v, len(Fingerprint))
				}
			case "expiresAt", "leaseUntil":
				if _, ok := v.(time.Time); !ok {
					t.Errorf("%s is a %T, want a timestamp (a TTL policy needs one)", field, v)
				}
			}
		}
		for field := range want {
			t.Errorf("key %.20q: field %q missing", tc.Key, field)
		}
	}
}

// FailedLayout checks the fields failures add to a stored record: a
// counted failure keeps attempts, reason and firstFailure on the
// released claim, the failure that ends the budget writes state FAILED,
// and Retry removes the three fields again, so that a record without
// failures holds none of them. fetch is Layout's. st must be fresh.
func FailedLayout(t *testing.T, st Store, fetch func(t *testing.T, key, name string) map[string]any) {
	ctx := t.Context()
	budget := store.Failure{Reason: "timeout", MaxAttempts: 2}
	var first time.Time
	for i, want := range []string{"CLAIMED", "FAILED"} {
		c, err := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
		if err != nil || c.Status != store.Won {
			t.Fatalf("Claim = %v, %v; want Won", c.Status, err)
		}
		if _, _, err := st.Fail(ctx, c, budget); err != nil {
			t.Fatal(err)
		}
		fields := fetch(t, "k", "k")
		if fields["state"] != want {
			t.Errorf("state = %v after failure %d, want %s", fields["state"], i+1, want)
		}
		if n, ok := fields["attempts"].(int64); !ok || n != int64(i+1) {
			t.Errorf("attempts = %#v after failure %d, want int64 %d", fields["attempts"], i+1, i+1)
		}
		if fields["reason"] != budget.Reason {
			t.Errorf("reason = %#v, want %q", fields["reason"], budget.Reason)
		}
		at, ok := fields["firstFailure"].(time.Time)
		switch {
		case !ok:
			t.Errorf("firstFailure is a %T, want a timestamp", fields["firstFailure"])
		case i == 0:
			first = at
		case !at.Equal(first):
			t.Errorf("firstFailure = %v after the second failure, want the first's %v", at, first)
		}
	}
	if ok, err := st.Retry(ctx, "k"); !ok || err != nil {
		t.Fatalf("Retry = %v, %v; want true", ok, err)
	}
	fields := fetch(t, "k", "k")
	for _, field := range []string{"attempts", "reason", "firstFailure"} {
		if v, ok := fields[field]; ok {
			t.Errorf("field %q = %#v after Retry, want it removed", field, v)
		}
	}
	if fields["state"] != "CLAIMED" {
		t.Errorf("state = %v after Retry, want CLAIMED", fields["state"])
	}
}
