package main

import (
	"errors"
	"io"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/example"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

func TestOnOrderKeysAndRejects(t *testing.T) {
	sup, supURL := newSupplier(t, false)
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	onOrder, err := newOnOrder(st, example.Config{SupplierURL: supURL}, example.NewLogger(io.Discard, 0))
	if err != nil {
		t.Fatal(err)
	}

	e := event.New()
	e.SetID("3001")
	e.SetType(pushenvelope.MessagePublishedType)
	e.SetSource(source)
	if err := e.SetData(event.ApplicationJSON, []byte(published("3001", "{}"))); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := onOrder(t.Context(), e); err != nil {
			t.Fatalf("OnOrder: %v", err)
		}
	}
	if n := sup.count("msg:3001"); n != 1 {
		t.Fatalf("the supplier got msg:3001 %d times, want once", n)
	}

	// OnOrder keys on the Pub/Sub message: another event type has no key.
	other := event.New()
	other.SetID("e-1")
	other.SetType("google.cloud.storage.object.v1.finalized")
	other.SetSource("//storage.googleapis.com/projects/_/buckets/b")
	if err := onOrder(t.Context(), other); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("a storage event: %v, want a gateway.ErrNoKey failure", err)
	}
	if sup.count("") != 0 {
		t.Fatal("the supplier was called for an event without a key")
	}
}
