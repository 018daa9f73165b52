// Package googletest holds the tests the Google stores (datastorestore,
// firestorestore) share beyond the storetest contract: the behaviour they
// both promise of a store that decides on the client, the RPC recorder
// that counts and breaks their round trips, and their benchmarks. Each
// store's test files keep what differs: how to reach the emulator, how a
// stored record is read back, which RPCs an operation costs.
//
//	func TestSkewMargin(t *testing.T) {
//		googletest.SkewMargin(t, func(t testing.TB, o googletest.Options) googletest.Store {
//			return newStore(t, client, datastorestore.Options{TTL: o.TTL, SkewMargin: o.SkewMargin, Now: o.Now})
//		})
//	}
package googletest

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/storetest"
)

// Store is what both Google stores implement.
type Store interface {
	store.Store
	store.Extender
	store.Failer
}

// Options are the store options a shared test sets; the zero value means
// the store's defaults.
type Options struct {
	TTL        time.Duration
	SkewMargin time.Duration
	Now        func() time.Time // nil: the real clock
}

// NewStore returns a fresh store set by o, whose records no other store
// sees.
type NewStore func(t testing.TB, o Options) Store

// InTx runs fn in a transaction of the database of st, a store from a
// NewStore, committing when fn returns nil: storetest.Config.InTx.
type InTx func(ctx context.Context, st store.Store, fn func(complete func(store.Claim) error) error) error

// Delete deletes key's record from st, a store from a NewStore, as a TTL
// policy on expiresAt does: storetest.Config.Delete.
type Delete func(t testing.TB, st store.Store, key string)

// Conformance runs the storetest contract on the suite's clock, the
// transactional cases included.
func Conformance(t *testing.T, newStore NewStore, inTx InTx, del Delete) {
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			return newStore(t, Options{TTL: s.TTL, Now: s.Now})
		},
		InTx:   inTx,
		Delete: del,
	})
}

// ConformanceRealClock runs the storetest contract on the real clock, as
// production does.
func ConformanceRealClock(t *testing.T, newStore NewStore, inTx InTx, del Delete) {
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			return newStore(t, Options{TTL: s.TTL})
		},
		RealClock: true,
		Tick:      250 * time.Millisecond,
		InTx:      inTx,
		Delete:    del,
	})
}
