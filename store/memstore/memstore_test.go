package memstore_test

import (
	"context"
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
			c, err := st.Claim(ctx, fmt.Sprintf("k-%d-%d", s, i), ttl/2)
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
	old, err := st.Claim(ctx, "k", time.Second/2)
	if err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(time.Hour)
	for i := range 5000 { // enough inserts to sweep every shard
		st.Claim(ctx, fmt.Sprint(i), time.Second/2)
	}
	if ok, _ := st.Complete(ctx, old); ok {
		t.Fatal("Complete of an expired claim must return false")
	}
	again, err := st.Claim(ctx, "k", time.Second/2)
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
			c, _ := st.Claim(ctx, k, time.Minute)
			st.Complete(ctx, c)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/record")
		runtime.KeepAlive(st)
	}
}
