package firestorestore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store/internal/record"

	"cloud.google.com/go/firestore"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestDocID(t *testing.T) {
	for _, tc := range []struct {
		key    string
		hashed bool
	}{
		{"1234567890", false},
		{"...", false},
		{".a", false},
		{"___", false},
		{"__x", false},
		{strings.Repeat("k", 1500), false},
		{"a/b", true},
		{"/", true},
		{".", true},
		{"..", true},
		{"____", true},
		{"__reserved__", true},
		{strings.Repeat("k", 1501), true},
		{"sha256:", true},
	} {
		id, hashed := docID(tc.key)
		if hashed != tc.hashed {
			t.Errorf("docID(%.20q) hashed = %v, want %v", tc.key, hashed, tc.hashed)
		}
		if !hashed && id != tc.key {
			t.Errorf("docID(%.20q) = %.20q, want the key itself", tc.key, id)
		}
		if hashed && (!strings.HasPrefix(id, hashPrefix) || len(id) != len(hashPrefix)+64 || !validID(id)) {
			t.Errorf("docID(%.20q) = %q, want sha256: and 64 hex digits", tc.key, id)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	in := record.Record{State: record.StateClaimed, Fence: 7, Token: "tok", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Key: "long key", Fingerprint: []byte{0, 0xff, ':'}, Origin: "push/m-101"}
	data := fields(&in)
	data["note"] = "added by an operator"
	out, err := parse(data)
	if err != nil {
		t.Fatalf("parse: %v (unknown fields must be ignored)", err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip = %+v, want %+v", out, in)
	}
	short := record.Record{State: record.StateDone, Fence: 1, Token: "t", LeaseUntil: t0, ExpiresAt: t0}
	if n := len(fields(&short)); n != 5 {
		t.Errorf("a record with a readable ID and no fingerprint has %d fields, want 5 (no key, no fingerprint, no origin)", n)
	}
	// A document written before fingerprints and origins existed has none.
	if out, err := parse(fields(&short)); err != nil || out.Fingerprint != nil || out.Origin != "" {
		t.Errorf("parse of a document without a fingerprint or an origin = %v, %+v; want none", err, out)
	}
	for _, u := range updates(&in) {
		if u.Path == fieldKey {
			t.Error("an update rewrites the key field, which never changes")
		}
	}
	// An update to a record without a fingerprint or an origin deletes the
	// field; one with an origin writes it.
	deletes := 0
	for _, u := range updates(&short) {
		if (u.Path == fieldFP || u.Path == fieldOrigin) && u.Value == firestore.Delete {
			deletes++
		}
	}
	if deletes != 2 {
		t.Errorf("an update to a record without a fingerprint and an origin deletes %d of the fields, want both", deletes)
	}
	for _, u := range updates(&in) {
		if u.Path == fieldOrigin && u.Value != in.Origin {
			t.Errorf("an update writes origin %v, want %q", u.Value, in.Origin)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for name, data := range map[string]map[string]any{
		"fence as a string":    {"state": "DONE", "fence": "1"},
		"expiresAt as an int":  {"state": "DONE", "expiresAt": int64(1)},
		"unknown state":        {"state": "MAYBE"},
		"no state at all":      {"fence": int64(1)},
		"token as a timestamp": {"state": "CLAIMED", "token": t0},
		"fingerprint as text":  {"state": "CLAIMED", "fingerprint": "a1"},
	} {
		if _, err := parse(data); err == nil {
			t.Errorf("%s: parse succeeded, want an error", name)
		}
	}
}
