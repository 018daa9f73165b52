package sqlstore_test

import (
	"database/sql/driver"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// serializableBackend is PostgreSQL with every transaction SERIALIZABLE,
// where concurrent upserts of one row fail with serialization errors that
// the store must absorb, switching to the Claim that writes only when it
// wins.
var serializableBackend = backend{name: "PostgreSQL-serializable", dialect: sqlstore.PostgreSQL, connector: func(t testing.TB) driver.Connector {
	t.Helper()
	cfg, err := pgx.ParseConfig(testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["default_transaction_isolation"] = "serializable"
	return stdlib.GetConnector(*cfg)
}}

// TestConcurrentClaimsOnePool races 64 Claims on one key over a pool of
// connections, round after round: exactly one wins, and every loser is told
// the winner's fence and lease. SQLite runs with a pool too, against the
// package's single-connection advice, to show that the advice is about
// speed, not correctness.
func TestConcurrentClaimsOnePool(t *testing.T) {
	for _, b := range append(backends, serializableBackend) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.store(t, b.open(t, 16), nil)
			for round := range 4 {
				key := fmt.Sprintf("hot-%d", round)
				res, errs := race(64, func() (store.Claim, error) { return s.Claim(t.Context(), key, time.Minute, store.ClaimOptions{}) })
				var winner *store.Claim
				for i, c := range res {
					if errs[i] != nil {
						t.Fatalf("round %d: concurrent Claim error: %v (contention must not surface)", round, errs[i])
					}
					if c.Status == store.Won {
						if winner != nil {
							t.Fatalf("round %d: two winners, fences %d and %d", round, winner.Fence, c.Fence)
						}
						winner = &res[i]
					}
				}
				if winner == nil {
					t.Fatalf("round %d: 64 concurrent Claims and no winner", round)
				}
				for _, c := range res {
					if c.Status == store.Won {
						continue
					}
					if c.Status != store.HeldByOther || c.Fence != winner.Fence || !c.LeaseUntil.Equal(winner.LeaseUntil) {
						t.Fatalf("round %d: loser got %v fence %d lease %v, want HeldByOther with the winner's fence %d and lease %v",
							round, c.Status, c.Fence, c.LeaseUntil, winner.Fence, winner.LeaseUntil)
					}
				}
			}
			// Only isolation above READ COMMITTED raises serialization
			// failures, and the first one switches PostgreSQL's Claim.
			if got, want := sqlstore.ClaimsWithoutWriting(s), b.name == serializableBackend.name; got != want {
				t.Errorf("after the races, claims without writing = %v, want %v", got, want)
			}
		})
	}
}

// race runs f n times at once and returns the results in order.
func race(n int, f func() (store.Claim, error)) ([]store.Claim, []error) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		res   = make([]store.Claim, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			res[i], errs[i] = f()
		})
	}
	close(start)
	wg.Wait()
	return res, errs
}

// TestContendedHandOver has many goroutines take turns on one key, as
// gateway.Mutex does: Claim until won, then Release. At no time may two
// goroutines hold the key, each win must carry a higher fence than the one
// before, and no statement may fail: deadlocks and busy errors are retried
// inside the store. (Not under SERIALIZABLE: there, every statement that
// meets a concurrent write of its row fails, and workers that hand a key
// over as fast as they can keep writing it; see docs/stores/sql.md.)
func TestContendedHandOver(t *testing.T) {
	const workers, turns = 16, 4
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, b.open(t, workers), b.dialect, nil)
			var (
				holders   atomic.Int32
				lastFence atomic.Int64
				wg        sync.WaitGroup
			)
			for range workers {
				wg.Go(func() {
					for won := 0; won < turns; {
						c, err := s.Claim(t.Context(), "mutex", time.Minute, store.ClaimOptions{})
						if err != nil {
							t.Errorf("Claim under contention: %v", err)
							return
						}
						if c.Status != store.Won {
							continue
						}
						won++
						if n := holders.Add(1); n != 1 {
							t.Errorf("%d holders at once", n)
						}
						if last := lastFence.Swap(c.Fence); c.Fence <= last {
							t.Errorf("won fence %d after fence %d: fences must rise", c.Fence, last)
						}
						holders.Add(-1)
						if err := s.Release(t.Context(), c); err != nil {
							t.Errorf("Release under contention: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
