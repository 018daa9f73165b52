package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

func TestKeyHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		key      string
		prefixes []string
		want     []string // in the hint
		not      []string // never in it
	}{
		{name: "prefixed key gets no second prefix", key: "msg:m-101", prefixes: []string{"msg:", "ledger:"},
			want: []string{"prefix msg: included"}, not: []string{"msg:msg:", "ledger:msg:"}},
		{name: "attribute key", key: "order_id:o-1",
			want: []string{"prefix order_id: included"}, not: []string{":order_id:"}},
		{name: "bare key, no prefix known", key: "m-101",
			want: []string{"order_id:m-101"}, not: []string{"msg:", "po-update:", "ledger:", "example-run"}},
		{name: "bare key, the store's prefixes", key: "m-101", prefixes: []string{"msg:", "shipment:"},
			want: []string{"try msg:m-101, shipment:m-101"}},
		{name: "a colon alone is no prefix", key: ":m-101", prefixes: []string{"msg:"}, want: []string{"msg::m-101"}},
		{name: "a trailing colon is no prefix", key: "m-101:", prefixes: []string{"msg:"}, want: []string{"msg:m-101:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := keyHint(tc.key, tc.prefixes)
			for _, w := range tc.want {
				if !strings.Contains(h, w) {
					t.Errorf("keyHint(%q, %q) = %q; want it to contain %q", tc.key, tc.prefixes, h, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(h, n) {
					t.Errorf("keyHint(%q, %q) = %q; must not contain %q", tc.key, tc.prefixes, h, n)
				}
			}
		})
	}
}

// The hint inspect prints for an absent, already prefixed key on a store
// with no record near it suggests no second prefix.
func TestInspectHintKeepsAPrefixedKey(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "records.db")
	seed(t, url)
	r := idemgate(t, "", "inspect", "-store", url, "msg:m-101")
	if r.code != exitOK || !strings.Contains(r.stdout, "hint:       the key is read as given, prefix msg: included") || strings.Contains(r.stdout, "msg:msg:") {
		t.Errorf("inspect msg:m-101 = %d:\n%s%s\nwant a hint that adds no prefix to a prefixed key", r.code, r.stdout, r.stderr)
	}
}

// The hint for an absent key without a prefix names the prefixes the
// store's keys carry, as its listing finds them, and only those.
func TestInspectHintFromTheStore(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "records.db")
	o, err := storeurl.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"order_id:o-1", "shipment:abc", "order_id:o-2"} {
		if c, err := o.Store.Claim(t.Context(), key, time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.Won {
			t.Fatalf("Claim(%q) = %v, %v", key, c.Status, err)
		}
	}
	o.Close()
	r := idemgate(t, "", "inspect", "-store", url, "zz-9")
	if r.code != exitOK || !strings.Contains(r.stdout, "hint:       this store's keys carry a prefix: try order_id:zz-9, shipment:zz-9\n") {
		t.Errorf("inspect zz-9 = %d:\n%s%s\nwant a hint naming the store's prefixes", r.code, r.stdout, r.stderr)
	}
}
