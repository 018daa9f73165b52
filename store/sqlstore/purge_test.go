package sqlstore_test

import (
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestPurgeExpired checks that a purge deletes every expired record, in
// batches, and nothing else: not a live claim, not a DONE record within its
// ttl, not a released claim (whose record keeps the fence rising).
func TestPurgeExpired(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := b.open(t, 4)
			table := uniqueTable()
			// Two stores on one table: records written through short expire
			// a few milliseconds after they are written.
			long := newStore(t, db, b.dialect, &sqlstore.Options{Table: table, TTL: time.Hour})
			short, err := sqlstore.New(db, b.dialect, &sqlstore.Options{Table: table, TTL: 2 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			must := func(c store.Claim, err error) store.Claim {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			held := must(long.Claim(ctx, "held", time.Minute, store.ClaimOptions{}))
			done := must(long.Claim(ctx, "done", time.Minute, store.ClaimOptions{}))
			if _, err := long.Complete(ctx, done); err != nil {
				t.Fatal(err)
			}
			released := must(long.Claim(ctx, "released", time.Minute, store.ClaimOptions{}))
			if err := long.Release(ctx, released); err != nil {
				t.Fatal(err)
			}
			const expired = 5
			var gone [expired]store.Claim
			for i := range expired {
				c := must(short.Claim(ctx, fmt.Sprintf("gone-%d", i), time.Millisecond, store.ClaimOptions{}))
				gone[i] = c
				if i%2 == 0 {
					if _, err := short.Complete(ctx, c); err != nil {
						t.Fatal(err)
					}
				}
			}

			if _, err := long.PurgeExpired(ctx, 0); err == nil {
				t.Error("PurgeExpired with limit 0 must fail")
			}
			// The short records expire on the database's clock within a few
			// milliseconds; purge until they have all gone.
			var purged int64
			for deadline := time.Now().Add(10 * time.Second); purged < expired && time.Now().Before(deadline); {
				n, err := long.PurgeExpired(ctx, 2)
				if err != nil {
					t.Fatal(err)
				}
				purged += n
			}
			if n, err := long.PurgeExpired(ctx, 2); err != nil || n != 0 || purged != expired {
				t.Fatalf("purged %d then %d (%v), want %d then 0", purged, n, err, expired)
			}
			if n := rows(t, db, table); n != 3 {
				t.Errorf("%d rows left, want the 3 live records", n)
			}

			for _, tc := range []struct {
				key   string
				want  store.Status
				fence int64 // the fence it must keep (held, done) or rise above
			}{
				{"held", store.HeldByOther, held.Fence},
				{"done", store.AlreadyDone, done.Fence},
				{"released", store.Won, released.Fence + 1}, // the record survived: its fence goes on
				{"gone-0", store.Won, gone[0].Fence + 1},    // purged: a new record, above the purged one's fences
				{"gone-1", store.Won, gone[1].Fence + 1},
			} {
				c := must(long.Claim(ctx, tc.key, time.Minute, store.ClaimOptions{}))
				if c.Status != tc.want || (c.Status == store.Won && c.Fence <= tc.fence) || (c.Status != store.Won && c.Fence != tc.fence) {
					t.Errorf("after the purge, Claim(%s) = %v fence %d, want %v with fence %d (or above, for a win)", tc.key, c.Status, c.Fence, tc.want, tc.fence)
				}
			}
		})
	}
}

// TestPurgeWithTraffic purges in a loop while workers complete messages
// and others leave records that expire at once: every completed message
// must still read back as a duplicate, and no operation may fail.
func TestPurgeWithTraffic(t *testing.T) {
	const workers, perWorker = 8, 25
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := b.open(t, workers+2)
			table := uniqueTable()
			long := newStore(t, db, b.dialect, &sqlstore.Options{Table: table, TTL: time.Hour})
			short, err := sqlstore.New(db, b.dialect, &sqlstore.Options{Table: table, TTL: 2 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var purger sync.WaitGroup
			purger.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := long.PurgeExpired(ctx, 10); err != nil {
						t.Errorf("PurgeExpired during traffic: %v", err)
						return
					}
				}
			})
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range perWorker {
						for _, s := range []*sqlstore.Store{short, long} {
							key := fmt.Sprintf("w%d-%d", w, i)
							if s == short {
								key = "expiring-" + key
							}
							c, err := s.Claim(ctx, key, time.Millisecond, store.ClaimOptions{})
							if err == nil && c.Status == store.Won {
								_, err = s.Complete(ctx, c)
							}
							if err != nil {
								t.Errorf("traffic during a purge: %v", err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			purger.Wait()
			for w := range workers {
				for i := range perWorker {
					key := fmt.Sprintf("w%d-%d", w, i)
					if c, err := long.Claim(ctx, key, time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.AlreadyDone {
						t.Fatalf("Claim(%s) after the purges = %v, %v; want AlreadyDone: a purge deleted a live record", key, c.Status, err)
					}
				}
			}
		})
	}
}

// rows counts the rows of table.
func rows(t testing.TB, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
