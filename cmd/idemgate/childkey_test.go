package main

import (
	"context"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store/memstore"
)

// TestChildKeyMatchesTheLibrary: childkey prints the child key a guarded
// body derives (gateway.ChildKey, in a real Lock) and the one the outbox
// gives a named message and an unnamed one (its position).
func TestChildKeyMatchesTheLibrary(t *testing.T) {
	const parent = "pipeline:order_id:o-1"
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inBody string
	if err := g.Lock(t.Context(), parent, func(ctx context.Context) error {
		inBody, err = gateway.ChildKey(ctx, "shipment")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	enqueued, err := outbox.Prepare(parent, []outbox.Message{{Topic: "shipments", Name: "shipment"}, {Topic: "audit"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want []string // every key the library derives for it
	}{
		{"shipment", []string{inBody, enqueued[0].ChildKey, enqueued[0].Attributes[outbox.ChildKeyAttribute]}},
		{"1", []string{enqueued[1].ChildKey}}, // unnamed, second of its CompleteTx
	} {
		r := idemgate(t, "", "childkey", parent, tc.name)
		got := strings.TrimSuffix(r.stdout, "\n")
		for _, want := range tc.want {
			if r.code != exitOK || got != want || len(got) != 64 {
				t.Errorf("childkey %s %s = %d, %q; want the library's %q", parent, tc.name, r.code, r.stdout, want)
			}
		}
	}
}

func TestChildKeyUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout or stderr
	}{
		{"help", []string{"childkey", "-h"}, exitOK, "idemgate inspect \"shipment:$(idemgate childkey"},
		{"listed in the help", []string{"-h"}, exitOK, "childkey PARENT NAME"},
		{"no name", []string{"childkey", "order-1"}, exitUsage, "PARENT and NAME"},
		{"too many", []string{"childkey", "order-1", "a", "b"}, exitUsage, "PARENT and NAME"},
		{"empty name", []string{"childkey", "order-1", ""}, exitUsage, "empty NAME"},
		{"invalid parent", []string{"childkey", "a\x00b", "x"}, exitUsage, "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := idemgate(t, "", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Errorf("%q = %d, stdout %q, stderr %q; want %d mentioning %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.want)
			}
		})
	}
}
