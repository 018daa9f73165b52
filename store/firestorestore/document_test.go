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
	failed := record.Record{State: record.StateFailed, Fence: 7, LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Origin: "push/m-101", Attempts: 3, Reason: "HTTP 400", FirstFailure: t0.Add(-time.Minute)}
	for _, in := range []record.Record{in, failed} {
		data := fields(&in)
		data["note"] = "added by an operator"
		out, err := parse(data)
		if err != nil {
			t.Fatalf("parse: %v (unknown fields must be ignored)", err)
		}
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("round trip = %+v, want %+v", out, in)
		}
	}
	short := record.Record{State: record.StateDone, Fence: 1, Token: "t", LeaseUntil: t0, ExpiresAt: t0}
	if n := len(fields(&short)); n != 5 {
		t.Errorf("a record with a readable ID and no fingerprint has %d fields, want 5 (no key, no fingerprint, no origin, no failures)", n)
	}
	// A document written before fingerprints, origins and failures existed
	// has none.
	if out, err := parse(fields(&short)); err != nil || out.Fingerprint != nil || out.Origin != "" || out.Attempts != 0 || out.Reason != "" || !out.FirstFailure.IsZero() {
		t.Errorf("parse of a document without a fingerprint, an origin or failures = %v, %+v; want none", err, out)
	}
	for _, u := range updates(&in) {
		if u.Path == "key" {
			t.Error("an update rewrites the key field, which never changes")
		}
	}
	// An update to a record without a fingerprint, an origin or failures
	// deletes those fields (a Retry or a Forget clears the failures); one
	// that holds them writes them.
	optional := map[string]bool{"fingerprint": true, "origin": true, "attempts": true, "reason": true, "firstFailure": true}
	deletes := 0
	for _, u := range updates(&short) {
		if optional[u.Path] && u.Value == firestore.Delete {
			deletes++
		}
	}
	if deletes != len(optional) {
		t.Errorf("an update to a record without the optional fields deletes %d of them, want all %d", deletes, len(optional))
	}
	want := map[string]any{"origin": failed.Origin, "attempts": int64(failed.Attempts), "reason": failed.Reason, "firstFailure": failed.FirstFailure}
	for _, u := range updates(&failed) {
		if w, ok := want[u.Path]; ok && u.Value != w {
			t.Errorf("an update writes %s %v, want %v", u.Path, u.Value, w)
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
		"attempts as a string": {"state": "FAILED", "attempts": "3"},
		"reason as an int":     {"state": "FAILED", "reason": int64(3)},
		"firstFailure as text": {"state": "FAILED", "firstFailure": "2030-01-01"},
	} {
		if _, err := parse(data); err == nil {
			t.Errorf("%s: parse succeeded, want an error", name)
		}
	}
}
