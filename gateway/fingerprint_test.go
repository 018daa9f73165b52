package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
)

func TestFingerprintPayload(t *testing.T) {
	fp := func(data string, attrs map[string]string) []byte {
		t.Helper()
		b, err := gateway.FingerprintPayload(&pushenvelope.Message{ID: "ignored", Data: []byte(data), Attributes: attrs})
		if err != nil || len(b) != store.MaxFingerprintLen {
			t.Fatalf("FingerprintPayload = %x, %v; want 32 bytes", b, err)
		}
		return b
	}
	base := fp("order 1", map[string]string{"order_id": "7", "currency": "EUR"})
	same := map[string][]byte{
		"attributes in another order": fp("order 1", map[string]string{"currency": "EUR", "order_id": "7"}),
		"Google's own attributes":     fp("order 1", map[string]string{"order_id": "7", "currency": "EUR", "googclient_OpenTelemetrySpanContext": "00-abc"}),
	}
	for name, b := range same {
		if !bytes.Equal(b, base) {
			t.Errorf("%s: fingerprint changed", name)
		}
	}
	differ := map[string][]byte{
		"other data":                 fp("order 2", map[string]string{"order_id": "7", "currency": "EUR"}),
		"other attribute value":      fp("order 1", map[string]string{"order_id": "7", "currency": "USD"}),
		"an attribute more":          fp("order 1", map[string]string{"order_id": "7", "currency": "EUR", "x": ""}),
		"bytes moved across a field": fp("order 1", map[string]string{"order_id": "7", "currencyE": "UR"}),
	}
	for name, b := range differ {
		if bytes.Equal(b, base) {
			t.Errorf("%s: same fingerprint, want a different one", name)
		}
	}
}

// Lock compares the fingerprint in its context with the record's: a
// different one is a conflict, reported to OnConflict, and the work does
// not run; the same one, or none on either side, is a duplicate.
func TestLockConflict(t *testing.T) {
	type seen struct {
		key         string
		stored, got []byte
	}
	var hooked []seen
	f := newFixture(t, gateway.Options{OnConflict: func(_ context.Context, key string, stored, got []byte) {
		hooked = append(hooked, seen{key, stored, got})
	}})
	ctx := t.Context()
	with := func(fp string) context.Context { return store.WithFingerprint(ctx, []byte(fp)) }
	run := func(context.Context) error { t.Error("the work ran for a conflict or a duplicate"); return nil }

	if err := f.g.Lock(with("A"), "order:7", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err := f.g.Lock(with("B"), "order:7", run)
	var ce *gateway.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, gateway.ErrConflict) || ce.Key != "order:7" || string(ce.Stored) != "A" || string(ce.Got) != "B" || !ce.Done {
		t.Fatalf("Lock with another fingerprint = %#v, want a *ConflictError{order:7, A, B, Done}", err)
	}
	if len(hooked) != 1 || hooked[0].key != "order:7" || string(hooked[0].stored) != "A" || string(hooked[0].got) != "B" {
		t.Errorf("OnConflict saw %v, want one call with order:7, A, B", hooked)
	}
	for name, c := range map[string]context.Context{"the same fingerprint": with("A"), "no fingerprint": ctx} {
		if err := f.g.Lock(c, "order:7", run); !errors.Is(err, gateway.ErrDuplicate) {
			t.Errorf("Lock with %s = %v, want ErrDuplicate", name, err)
		}
	}

	// A live holder with another payload: a conflict too, not in progress.
	if _, err := f.st.Claim(with("C"), "order:8", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := f.g.Lock(with("D"), "order:8", run); !errors.As(err, &ce) || ce.Done {
		t.Errorf("Lock against a holder with another fingerprint = %v, want a *ConflictError with Done false", err)
	}
}
