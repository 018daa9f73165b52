package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// With HideKeys, no line the gateway logs holds the key, not even inside a
// store's error; nor does the error a direct Lock returns for work that
// did not run.
func TestHideKeysScrubsStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "customer-4111111111111111"
		st, _ := memstore.New(nil)
		ks := &keyErrors{faulty: faulty{Store: st}}
		ks.failRelease.Store(true)
		ks.failExtend.Store(true)
		ks.completeFailures.Store(1)
		l := &logs{}
		g, _ := gateway.New(ks, &gateway.Options{Logger: l.logger(), HideKeys: true, Lease: time.Second})
		_ = g.Lock(t.Context(), key, func(ctx context.Context) error { <-ctx.Done(); return errors.New("gave up") })
		_ = g.Lock(t.Context(), key+"-2", func(ctx context.Context) error { return nil })
		ks.failClaim.Store(true)
		err := g.Lock(t.Context(), key, func(context.Context) error { return nil })
		if err == nil || strings.Contains(err.Error(), key) {
			t.Errorf("Lock's store error = %v, want one without the key", err)
		}
		if len(l.Records()) < 4 {
			t.Fatalf("only %d lines; the test needs the renewal, release, complete and claim failures", len(l.Records()))
		}
		for _, r := range l.Records() {
			if strings.Contains(r.String(), key) {
				t.Errorf("line holds the key: %s", r)
			}
		}
	})
}

// keyErrors fails as faulty does, with errors that quote the key, as a
// store's errors may.
type keyErrors struct{ faulty }

func (s *keyErrors) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	c, err := s.faulty.Claim(ctx, key, lease, opts)
	return c, quote(key, err)
}

func (s *keyErrors) Complete(ctx context.Context, c store.Claim) (bool, error) {
	ok, err := s.faulty.Complete(ctx, c)
	return ok, quote(c.Key, err)
}

func (s *keyErrors) Release(ctx context.Context, c store.Claim) error {
	return quote(c.Key, s.faulty.Release(ctx, c))
}

func (s *keyErrors) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	nc, err := s.faulty.Extend(ctx, c, lease)
	return nc, quote(c.Key, err)
}

func quote(key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("record %q: %w", key, err)
}
