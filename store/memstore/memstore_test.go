package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
	"github.com/idemgate/idemgate/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			st, err := memstore.New(&memstore.Options{TTL: s.TTL, Now: s.Now})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		Delete: sweep,
	})
}

// sweep is storetest.Config.Delete: the store's own sweep drops the record.
func sweep(t testing.TB, st store.Store, key string) {
	memstore.Sweep(st.(*memstore.Store))
	if n := st.(*memstore.Store).Len(); n != 0 {
		t.Fatalf("the sweep left %d records, want none", n)
	}
}

func TestConformanceRealClock(t *testing.T) {
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			st, err := memstore.New(&memstore.Options{TTL: s.TTL})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		RealClock: true,
		Tick:      30 * time.Millisecond,
		Delete:    sweep,
	})
}

func TestNewRejectsNegativeTTL(t *testing.T) {
	if _, err := memstore.New(&memstore.Options{TTL: -time.Second}); err == nil {
		t.Fatal("New with a negative TTL must fail")
	}
}

// fakeClock is a clock moved by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestMemoryStaysBounded feeds many distinct keys over a long (fake) time and
// checks that expired records are dropped, so the store does not grow with
// the number of keys ever seen.
func TestMemoryStaysBounded(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	const ttl = time.Minute
	st, err := memstore.New(&memstore.Options{TTL: ttl, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// 200 keys per simulated second for 20 minutes: 240k keys in all, but
	// only about 2 minutes' worth (lease + ttl) alive at any time.
	const perSec, secs = 200, 1200
	peak := 0
	for s := range secs {
		for i := range perSec {
			c, err := st.Claim(ctx, fmt.Sprintf("k-%d-%d", s, i), ttl/2, store.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Complete(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		clk.t = clk.t.Add(time.Second)
		peak = max(peak, st.Len())
	}
	alive := perSec * int((ttl+time.Minute)/time.Second) // an upper bound on unexpired records
	if peak > 3*alive {
		t.Fatalf("peak records = %d after %d keys; want at most %d (expired records must be dropped)", peak, perSec*secs, 3*alive)
	}
	t.Logf("peak %d records for %d keys (%d alive at most)", peak, perSec*secs, alive)
}

func TestExpiredRecordsDroppedKeepFenceSafety(t *testing.T) {
	// A record dropped after expiresAt is made anew above every fence it
	// had, so the old claim can never act on the new one.
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	st, _ := memstore.New(&memstore.Options{TTL: time.Second, Now: clk.now})
	ctx := context.Background()
	old, err := st.Claim(ctx, "k", time.Second/2, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(time.Hour)
	for i := range 5000 { // enough inserts to sweep every shard
		st.Claim(ctx, fmt.Sprint(i), time.Second/2, store.ClaimOptions{})
	}
	if ok, _ := st.Complete(ctx, old); ok {
		t.Fatal("Complete of an expired claim must return false")
	}
	again, err := st.Claim(ctx, "k", time.Second/2, store.ClaimOptions{})
	if err != nil || again.Fence <= old.Fence {
		t.Fatalf("Claim after the sweep = fence %d, %v; want a fence above %d", again.Fence, err, old.Fence)
	}
	if ok, _ := st.Complete(ctx, old); ok {
		t.Fatal("Complete of the dropped record's claim must not complete the new one")
	}
}

// BenchmarkBytesPerRecord reports the heap held per live record.
func BenchmarkBytesPerRecord(b *testing.B) {
	const n = 200_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("projects/p/subscriptions/s/%016d", i) // a messageId-sized key
	}
	ctx := context.Background()
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		st, _ := memstore.New(nil)
		for _, k := range keys {
			c, _ := st.Claim(ctx, k, time.Minute, store.ClaimOptions{})
			st.Complete(ctx, c)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/record")
		runtime.KeepAlive(st)
	}
}

// memstore keeps times to the nanosecond: a lease ends exactly lease after
// the Claim's reading of the clock, not up to a microsecond before, and
// Extend counts from its own reading the same way.
func TestTimesKeepNanoseconds(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 123456789)}
	st, _ := memstore.New(&memstore.Options{TTL: time.Minute, Now: clk.now})
	ctx := t.Context()
	lease := time.Second + 7
	c, err := st.Claim(ctx, "k", lease, store.ClaimOptions{})
	if err != nil || !c.LeaseUntil.Equal(clk.t.Add(lease)) {
		t.Fatalf("Claim = %+v, %v; want the lease to end at %v", c, err, clk.t.Add(lease))
	}
	clk.t = clk.t.Add(lease - 1)
	if got, _ := st.Claim(ctx, "k", lease, store.ClaimOptions{}); got.Status != store.HeldByOther {
		t.Fatalf("Claim a nanosecond before the lease ends = %v, want held by other", got.Status)
	}
	clk.t = clk.t.Add(-time.Millisecond + 3)
	ext, err := st.Extend(ctx, c, lease)
	if err != nil || !ext.LeaseUntil.Equal(clk.t.Add(lease)) {
		t.Fatalf("Extend = %+v, %v; want the lease to end at %v", ext, err, clk.t.Add(lease))
	}
	r, ok, _ := st.Inspect(ctx, "k")
	if !ok || !r.LeaseUntil.Equal(ext.LeaseUntil) || !r.ExpiresAt.Equal(ext.LeaseUntil.Add(time.Minute)) || !r.ReadAt.Equal(clk.t) {
		t.Fatalf("Inspect = %+v, %v; want the extended lease and an expiry a ttl after it", r, ok)
	}
}

// The fingerprint a Claim keeps is its own copy, and every claim hands out
// a copy of it: neither the caller's array nor a returned claim's can
// change the record.
func TestFingerprintsAreCopied(t *testing.T) {
	st, _ := memstore.New(nil)
	fp := []byte("abc")
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: fp}
	c, err := st.Claim(ctx, "k", time.Minute, opts)
	if err != nil || string(c.Fingerprint) != "abc" {
		t.Fatalf("Claim = %+v, %v; want won with fingerprint abc", c, err)
	}
	copy(fp, "xyz")
	c.Fingerprint[0] = 'q'
	held, _ := st.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
	if string(held.Fingerprint) != "abc" {
		t.Fatalf("the record's fingerprint became %q, want abc", held.Fingerprint)
	}
	held.Fingerprint[0] = 'q'
	ext, err := st.Extend(t.Context(), c, time.Minute)
	if err != nil || string(ext.Fingerprint) != "abc" {
		t.Fatalf("Extend = %+v, %v; want fingerprint abc", ext, err)
	}
	ext.Fingerprint[0] = 'q'
	if r, _, _ := st.Inspect(t.Context(), "k"); string(r.Fingerprint) != "abc" {
		t.Fatalf("the record's fingerprint became %q, want abc", r.Fingerprint)
	}
	if c, _ := st.Claim(t.Context(), "none", time.Minute, store.ClaimOptions{}); c.Fingerprint != nil {
		t.Fatalf("a Claim without a fingerprint = %q, want nil", c.Fingerprint)
	}
}

func TestLeaseMustBePositive(t *testing.T) {
	st, _ := memstore.New(nil)
	ctx := t.Context()
	c, _ := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	for _, lease := range []time.Duration{0, -time.Second} {
		if _, err := st.Claim(ctx, "j", lease, store.ClaimOptions{}); err == nil {
			t.Errorf("Claim with lease %v succeeded, want an error", lease)
		}
		if _, err := st.Extend(ctx, c, lease); err == nil || errors.Is(err, store.ErrFenced) {
			t.Errorf("Extend with lease %v = %v, want an error other than ErrFenced", lease, err)
		}
	}
}

// A duplicate costs no allocation: the Claim draws no token for a DONE
// record.
func TestDuplicateAllocatesNothing(t *testing.T) {
	st, _ := memstore.New(nil)
	ctx := context.Background()
	c, _ := st.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	st.Complete(ctx, c)
	if n := testing.AllocsPerRun(100, func() { st.Claim(ctx, "k", time.Minute, store.ClaimOptions{}) }); n != 0 {
		t.Fatalf("a duplicate Claim allocates %v times, want none", n)
	}
}

// A store whose shards have grown past the first sweep still sweeps: once
// a generation of records has expired, inserting the next generation
// drops it rather than piling the two up.
func TestLargeShardsSweep(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	st, _ := memstore.New(&memstore.Options{TTL: time.Minute, Now: clk.now})
	ctx := t.Context()
	const n = 150_000 // over 2,000 records a shard: past the first sweeps
	for gen := range 2 {
		for i := range n {
			if _, err := st.Claim(ctx, fmt.Sprint(gen, "-", i), time.Second, store.ClaimOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		clk.t = clk.t.Add(time.Hour) // every record of this generation expires
	}
	if got := st.Len(); got >= 2*n-n/4 {
		t.Fatalf("%d records after two generations of %d, the first expired; want well under %d (the expired ones swept)", got, n, 2*n)
	}
}

// The sweep is lazy: until a shard has doubled since its last sweep (at
// least 1,024 records), inserts leave expired records in place, so that
// each insert costs a constant amortised share of the sweeps.
func TestSweepWaitsForTheShardToDouble(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	st, _ := memstore.New(&memstore.Options{TTL: time.Minute, Now: clk.now})
	ctx := t.Context()
	const n = 6_400 // about 100 a shard, far from 1,024
	for i := range n {
		st.Claim(ctx, fmt.Sprint("old-", i), time.Second, store.ClaimOptions{})
	}
	clk.t = clk.t.Add(time.Hour)
	for i := range n {
		st.Claim(ctx, fmt.Sprint("new-", i), time.Second, store.ClaimOptions{})
	}
	if got := st.Len(); got != 2*n {
		t.Fatalf("%d records, want all %d: no shard has reached its sweep", got, 2*n)
	}
}
