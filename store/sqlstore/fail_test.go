package sqlstore_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestFailAtDecidesAsFailedAttempts checks the threshold that the Fail
// statements compare the new count with against store.Failure's own
// decision, for every count a record can have had before.
func TestFailAtDecidesAsFailedAttempts(t *testing.T) {
	for _, f := range []store.Failure{
		{}, {Final: true}, {MaxAttempts: 1}, {MaxAttempts: 2}, {MaxAttempts: 5},
		{Final: true, MaxAttempts: 3}, {MaxAttempts: -1}, {MaxAttempts: math.MaxInt32 + 1},
	} {
		at := sqlstore.FailAt(f)
		for before := range 8 {
			n, want := f.FailedAttempts(before)
			if got := at > 0 && int64(n) >= at; got != want {
				t.Errorf("%+v after %d failures: the statements decide FAILED = %v (threshold %d), FailedAttempts %v", f, before, got, at, want)
			}
		}
	}
}

// TestFailDecidesOnce runs Fail on a clock that steps on every reading:
// every instant a failure writes (the lease's end, the first failure, the
// expiry, and a released claim's raised fence) must count from one
// reading, so that a final first failure's FirstFailure is its FailedAt.
func TestFailDecidesOnce(t *testing.T) {
	for _, tc := range steppingBackends {
		t.Run(tc.b.name, func(t *testing.T) {
			t.Parallel()
			const ttl = int64(3_600_000)
			db := tc.b.open(t, 1)
			table := uniqueTable()
			s := tc.b.store(t, db, &sqlstore.Options{Table: table, TTL: time.Duration(ttl) * time.Millisecond})
			clock := tc.clock(t, db)
			sqlstore.UseClock(s, clock.expr)
			clock.set(t, 1_000_000_000)
			read := func(key string) (state, fence, leaseUntil, expiresAt, first int64) {
				q := `SELECT state, fence, lease_until, expires_at, first_failure FROM ` + table + ` WHERE key_text = $1`
				if tc.b.dialect != sqlstore.PostgreSQL {
					q = strings.Replace(q, "$1", "?", 1)
				}
				if err := db.QueryRowContext(t.Context(), q, key).Scan(&state, &fence, &leaseUntil, &expiresAt, &first); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, f := range []store.Failure{{Reason: "final", Final: true}, {Reason: "counted"}} {
				key := f.Reason
				c, err := s.Claim(t.Context(), key, time.Minute, store.ClaimOptions{})
				if err != nil || c.Status != store.Won {
					t.Fatalf("Claim = %+v, %v; want Won", c, err)
				}
				if _, _, err := s.Fail(t.Context(), c, f); err != nil {
					t.Fatal(err)
				}
				state, fence, until, expires, first := read(key)
				want := fmt.Sprintf("lease_until = first_failure = %d, expires_at %d", until, until+ttl)
				got := fmt.Sprintf("lease_until = %d, first_failure = %d, expires_at %d", until, first, expires)
				if f.Final {
					if state != 3 || fence != c.Fence || first != until || expires != until+ttl {
						t.Errorf("final failure: state %d fence %d, %s; want FAILED at fence %d, %s", state, fence, got, c.Fence, want)
					}
					continue
				}
				// A released claim keeps its expiry, which lies past a ttl
				// from the failure already.
				if state != 1 || fence != until*1000 || first != until {
					t.Errorf("counted failure: state %d fence %d, %s; want a released claim at fence %d, the failure's reading", state, fence, got, until*1000)
				}
			}
		})
	}
}
