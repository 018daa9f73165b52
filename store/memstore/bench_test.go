package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// benchKeys is how many keys the benchmarks cycle through: a warm map of
// a steady size, so that map growth does not blur the cost of deciding.
const benchKeys = 1 << 16

// benchStore returns a memstore on a clock moved by hand, its ttl, the
// clock, and benchKeys keys.
func benchStore(b *testing.B) (*memstore.Store, time.Duration, *time.Time, []string) {
	b.Helper()
	const ttl = time.Minute
	now := time.Unix(1e9, 0)
	st, err := memstore.New(&memstore.Options{TTL: ttl, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "projects/p/subscriptions/s/" + strconv.Itoa(i)
	}
	return st, ttl, &now, keys
}

// BenchmarkClaimComplete measures the store's side of a fresh message: a
// Claim that wins, then its Complete. Once every key is DONE, the clock
// moves past their expiry, so each lap claims over expired records (whose
// fences carry on) and the map keeps its size.
func BenchmarkClaimComplete(b *testing.B) {
	st, ttl, now, keys := benchStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c, err := st.Claim(ctx, keys[i], time.Second, store.ClaimOptions{})
		if err != nil || c.Status != store.Won {
			b.Fatalf("Claim = %+v, %v; want won", c, err)
		}
		if ok, err := st.Complete(ctx, c); !ok || err != nil {
			b.Fatalf("Complete = %v, %v; want true", ok, err)
		}
		if i++; i == len(keys) {
			i = 0
			*now = now.Add(2 * ttl)
		}
	}
}

// BenchmarkClaimDuplicate measures a duplicate: a Claim of a DONE record.
func BenchmarkClaimDuplicate(b *testing.B) {
	st, _, _, keys := benchStore(b)
	ctx := context.Background()
	for _, k := range keys {
		c, _ := st.Claim(ctx, k, time.Second, store.ClaimOptions{})
		st.Complete(ctx, c)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if c, err := st.Claim(ctx, keys[i&(benchKeys-1)], time.Second, store.ClaimOptions{}); err != nil || c.Status != store.AlreadyDone {
			b.Fatalf("Claim = %+v, %v; want already done", c, err)
		}
		i++
	}
}

// BenchmarkClaimExtendRelease measures a renewed claim given back: a Claim
// over a released record, one Extend, and the Release.
func BenchmarkClaimExtendRelease(b *testing.B) {
	st, _, _, keys := benchStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c, err := st.Claim(ctx, keys[i&(benchKeys-1)], time.Second, store.ClaimOptions{})
		if err != nil || c.Status != store.Won {
			b.Fatalf("Claim = %+v, %v; want won", c, err)
		}
		if c, err = st.Extend(ctx, c, time.Second); err != nil {
			b.Fatalf("Extend = %v", err)
		}
		if err := st.Release(ctx, c); err != nil {
			b.Fatalf("Release = %v", err)
		}
		i++
	}
}
