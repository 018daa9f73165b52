package datastorestore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/datastore"
)

func TestEntityName(t *testing.T) {
	for _, tc := range []struct {
		key    string
		hashed bool
	}{
		{"1234567890", false},
		{"a/b/c", false},
		{".", false},
		{"_x_", false},
		{"___", false},
		{"__x", false},
		{strings.Repeat("k", 1500), false},
		{"sha", false},
		{"____", true},
		{"__reserved__", true},
		{strings.Repeat("k", 1501), true},
		{"sha256:", true},
		{"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", true},
	} {
		name, hashed := entityName(tc.key)
		if hashed != tc.hashed {
			t.Errorf("entityName(%.20q) hashed = %v, want %v", tc.key, hashed, tc.hashed)
		}
		if !hashed && name != tc.key {
			t.Errorf("entityName(%.20q) = %.20q, want the key itself", tc.key, name)
		}
		if hashed && (!strings.HasPrefix(name, hashPrefix) || len(name) != len(hashPrefix)+64 || name == tc.key) {
			t.Errorf("entityName(%.20q) = %q, want sha256: and 64 hex digits", tc.key, name)
		}
		if again, _ := entityName(tc.key); again != name {
			t.Errorf("entityName(%.20q) is not deterministic", tc.key)
		}
	}
	a, _ := entityName(strings.Repeat("k", 1501))
	b, _ := entityName(strings.Repeat("k", 1502))
	if a == b {
		t.Error("two long keys share a name")
	}
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRecordRoundTrip(t *testing.T) {
	for _, in := range []entity{
		{State: record.StateClaimed, Fence: 7, Token: "tok", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Key: "long key", Fingerprint: []byte{0, 0xff, ':'}, Origin: "push/m-101"},
		{State: record.StateClaimed, Fence: 8, LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Origin: "push/m-101", Attempts: 2, Reason: "timeout", FirstFailure: t0.Add(-time.Minute)},
		{State: record.StateFailed, Fence: 7, LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Attempts: 3, Reason: "HTTP 400", FirstFailure: t0.Add(-time.Minute)},
	} {
		ps, err := in.Save()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if !p.NoIndex {
				t.Errorf("property %q indexed", p.Name)
			}
		}
		ps = append(ps, datastore.Property{Name: "note", Value: "added by an operator"})
		var out entity
		if err := out.Load(ps); err != nil {
			t.Fatalf("Load: %v (unknown properties must be ignored)", err)
		}
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("round trip = %+v, want %+v", out, in)
		}
	}
	short := entity{State: record.StateDone, Fence: 1, Token: "t", LeaseUntil: t0, ExpiresAt: t0}
	ps, _ := short.Save()
	if len(ps) != 5 {
		t.Errorf("a record with a readable name and no fingerprint saved %d properties, want 5 (no key, no fingerprint, no origin, no failures)", len(ps))
	}
	// An entity written before fingerprints, origins and failures existed
	// has none.
	out := entity{Fingerprint: []byte("stale"), Origin: "stale", Attempts: 1, Reason: "stale", FirstFailure: t0}
	if err := out.Load(ps); err != nil || out.Fingerprint != nil || out.Origin != "" || out.Attempts != 0 || out.Reason != "" || !out.FirstFailure.IsZero() {
		t.Errorf("Load of an entity without a fingerprint, an origin or failures = %v, %+v; want none", err, out)
	}
}

func TestRecordLoadRejects(t *testing.T) {
	for name, ps := range map[string][]datastore.Property{
		"fence as a string":    {{Name: "state", Value: "DONE"}, {Name: "fence", Value: "1"}},
		"expiresAt as an int":  {{Name: "state", Value: "DONE"}, {Name: "expiresAt", Value: int64(1)}},
		"unknown state":        {{Name: "state", Value: "MAYBE"}},
		"no state at all":      {{Name: "fence", Value: int64(1)}},
		"token as a timestamp": {{Name: "state", Value: "CLAIMED"}, {Name: "token", Value: t0}},
		"fingerprint as text":  {{Name: "state", Value: "CLAIMED"}, {Name: "fingerprint", Value: "a1"}},
		"attempts as a string": {{Name: "state", Value: "FAILED"}, {Name: "attempts", Value: "3"}},
		"reason as an int":     {{Name: "state", Value: "FAILED"}, {Name: "reason", Value: int64(3)}},
		"firstFailure as text": {{Name: "state", Value: "FAILED"}, {Name: "firstFailure", Value: "2030-01-01"}},
	} {
		var r entity
		if err := r.Load(ps); err == nil {
			t.Errorf("%s: Load succeeded, want an error", name)
		}
	}
}
