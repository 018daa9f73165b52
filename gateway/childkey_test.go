package gateway_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/pushenvelope"
)

// A body's child key is the same on every attempt of a delivery, whoever
// runs it, and is the outbox's key of the message of that name.
func TestChildKeySameOnEveryAttempt(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	var keys []string
	attempt := func(fail bool) error {
		return f.g.Lock(t.Context(), "order-7", func(ctx context.Context) error {
			k, err := gateway.ChildKey(ctx, "shipment")
			if err != nil {
				return err
			}
			keys = append(keys, k)
			if fail {
				return errors.New("crashed after publishing")
			}
			return nil
		})
	}
	if err := attempt(true); err == nil {
		t.Fatal("the first attempt must fail")
	}
	if err := attempt(false); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("child keys %q: a retried delivery must derive the same child key", keys)
	}
	if keys[0] != outbox.ChildKey("order-7", "shipment") {
		t.Errorf("ChildKey = %q, want outbox.ChildKey(claim key, name)", keys[0])
	}
	var other string
	if err := f.g.Lock(t.Context(), "order-8", func(ctx context.Context) error {
		var err error
		other, err = gateway.ChildKey(ctx, "shipment")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if other == keys[0] {
		t.Error("two parents' messages of one name must have different child keys")
	}
}

func TestChildKeyOutsideABody(t *testing.T) {
	if _, err := gateway.ChildKey(context.Background(), "x"); !errors.Is(err, gateway.ErrNoClaim) {
		t.Errorf("ChildKey outside a guarded body = %v, want ErrNoClaim", err)
	}
	f := newFixture(t, gateway.Options{})
	err := f.g.Lock(t.Context(), "k", func(ctx context.Context) error {
		_, err := gateway.ChildKey(ctx, "")
		return err
	})
	if err == nil {
		t.Error("an empty child name must be an error")
	}
}

func TestKeyFromChildKey(t *testing.T) {
	ck := outbox.ChildKey("parent", "0")
	for _, tc := range []struct {
		name string
		m    pushenvelope.Message
		want string
	}{
		{"child key", pushenvelope.Message{ID: "m1", Attributes: map[string]string{outbox.ChildKeyAttribute: ck}}, ck},
		{"republished with another messageId", pushenvelope.Message{ID: "m2", Attributes: map[string]string{outbox.ChildKeyAttribute: ck}}, ck},
		{"no attribute: messageId", pushenvelope.Message{ID: "m3"}, "m3"},
		{"empty attribute: messageId", pushenvelope.Message{ID: "m4", Attributes: map[string]string{outbox.ChildKeyAttribute: ""}}, "m4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := gateway.KeyFromChildKey(&tc.m)
			if err != nil || got != tc.want {
				t.Errorf("KeyFromChildKey = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := gateway.KeyFromChildKey(&pushenvelope.Message{}); err == nil {
		t.Error("no child key and no messageId: no key")
	}
}
