package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// storeKeyError is a store error type that carries the key in a field, as
// a driver's error might.
type storeKeyError struct{ Key string }

func (e *storeKeyError) Error() string { return "record " + e.Key + " is locked by a migration" }

func gatewayHiding(t *testing.T, hide bool) *Gateway {
	t.Helper()
	st, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(st, &Options{Logger: slog.New(slog.DiscardHandler), HideKeys: hide})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// errorTexts is the text of err and of every error reachable from it
// through Unwrap.
func errorTexts(err error) []string {
	if err == nil {
		return nil
	}
	out := []string{err.Error(), fmt.Sprintf("%+v", err)}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		out = append(out, errorTexts(e.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			out = append(out, errorTexts(inner)...)
		}
	}
	return out
}

func TestHideKey(t *testing.T) {
	const key = "customer-4711@example.com"
	g := gatewayHiding(t, true)
	digest := g.keyAttr(key).Value.String()
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("keyAttr(key) = %v, want the gateway's sha256 digest", g.keyAttr(key))
	}
	lease := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

	t.Run("in progress keeps its type and lease, with the digest as Key", func(t *testing.T) {
		got := g.hideKey(key, &InProgressError{Key: key, LeaseUntil: lease})
		var ip *InProgressError
		if !errors.As(got, &ip) || ip.Key != digest || !ip.LeaseUntil.Equal(lease) {
			t.Fatalf("hideKey = %#v, want an *InProgressError{Key: %q, LeaseUntil: %v}", got, digest, lease)
		}
		if !errors.Is(got, ErrInProgress) {
			t.Error("the hidden in-progress error must still match ErrInProgress")
		}
	})
	t.Run("store error keeps its sentinels and text, not its types", func(t *testing.T) {
		cause := fmt.Errorf("%w: claim: %w", ErrStore, errors.Join(context.DeadlineExceeded, &storeKeyError{Key: key}))
		got := g.hideKey(key, cause)
		for _, target := range []error{ErrStore, context.DeadlineExceeded} {
			if !errors.Is(got, target) {
				t.Errorf("errors.Is(hidden, %v) = false, want true", target)
			}
		}
		var ske *storeKeyError
		if errors.As(got, &ske) {
			t.Errorf("errors.As reached the store's error type, whose field holds the key %q", ske.Key)
		}
		if want := "record " + digest + " is locked"; !strings.Contains(got.Error(), want) {
			t.Errorf("text %q, want the cause's text with the digest in the key's place (%q)", got, want)
		}
	})
	for _, cause := range []error{
		&InProgressError{Key: key, LeaseUntil: lease},
		fmt.Errorf("%w: %w", ErrNoKey, &storeKeyError{Key: key}),
	} {
		for _, text := range errorTexts(g.hideKey(key, cause)) {
			if strings.Contains(text, key) {
				t.Errorf("hideKey(%T) still says %q", cause, text)
			}
		}
	}
	t.Run("a store's name for the key is replaced, cut or escaped", func(t *testing.T) {
		for _, k := range []string{strings.Repeat("alice@example.com/", 12), `order "4711" of alice`} {
			got := g.hideKey(k, fmt.Errorf("somestore: Fail %s: %w", store.QuoteKey(k), context.Canceled))
			if strings.Contains(got.Error(), "alice") {
				t.Errorf("hideKey(%d-byte key) = %q; want no piece of the key", len(k), got)
			}
			if !errors.Is(got, context.Canceled) {
				t.Errorf("hideKey(%d-byte key) = %v; want it to match context.Canceled still", len(k), got)
			}
		}
	})
	t.Run("keys shown: the cause is unchanged", func(t *testing.T) {
		cause := &InProgressError{Key: key, LeaseUntil: lease}
		if got := gatewayHiding(t, false).hideKey(key, cause); got != error(cause) {
			t.Errorf("hideKey without HideKeys = %#v, want the cause itself", got)
		}
	})
	t.Run("no key: the cause is unchanged", func(t *testing.T) {
		cause := errors.New("the event has no id")
		if got := g.hideKey("", cause); got != cause {
			t.Errorf("hideKey with no key = %#v, want the cause itself", got)
		}
	})
}
