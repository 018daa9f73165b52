// Package claimwatch wraps an in-memory store so that a test can tell when
// a Claim met a live holder: the moment a delivery starts waiting for the
// holder (gateway.Options.WaitForHolder), or answers that the key is in
// progress. It is how tests of the wait synchronise, without sleeping.
package claimwatch

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// Store is a memstore whose Claims that answer HeldByOther are told on
// Held. Every other method is memstore's own (it stays a store.Extender,
// Inspector, Lister and Failer).
type Store struct {
	*memstore.Store
	held chan struct{}
}

// New returns a fresh in-memory store under watch.
func New() (*Store, error) {
	st, err := memstore.New(nil)
	if err != nil {
		return nil, err
	}
	return &Store{Store: st, held: make(chan struct{}, 64)}, nil
}

// Held receives once for each Claim that answered HeldByOther (up to 64
// unread).
func (s *Store) Held() <-chan struct{} { return s.held }

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	c, err := s.Store.Claim(ctx, key, lease, opts)
	if err == nil && c.Status == store.HeldByOther {
		select {
		case s.held <- struct{}{}:
		default:
		}
	}
	return c, err
}
