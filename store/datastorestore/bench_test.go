package datastorestore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
)

// The benchmarks run against the emulator, whose speed says little about
// production Datastore: they compare operations with each other and catch
// regressions in round trips, nothing more.
//
//	go test -run '^$' -bench . ./store/datastorestore/

// BenchmarkClaim claims fresh keys one after another.
func BenchmarkClaim(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	i := 0
	for b.Loop() {
		i++
		if _, err := st.Claim(ctx, fmt.Sprint("m", i), time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkClaimParallel claims fresh keys from many goroutines.
func BenchmarkClaimParallel(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	var n atomic.Int64
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := st.Claim(ctx, fmt.Sprint("m", n.Add(1)), time.Minute); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkMessage is the store's work for one fresh message: Claim, then
// Complete.
func BenchmarkMessage(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	i := 0
	for b.Loop() {
		i++
		c, err := st.Claim(ctx, fmt.Sprint("m", i), time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Complete(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkDuplicate claims a key that is already DONE.
func BenchmarkDuplicate(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	c, err := st.Claim(ctx, "done", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Complete(ctx, c); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		d, err := st.Claim(ctx, "done", time.Minute)
		if err != nil || d.Status != store.AlreadyDone {
			b.Fatal(d.Status, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// benchStore returns a store whose connection and emulator are warm, so
// that the first timed call does not pay for dialing or JIT compilation.
func benchStore(b *testing.B) *datastorestore.Store {
	st := newStore(b, newClient(b), datastorestore.Options{})
	for i := range 20 {
		if _, err := st.Claim(b.Context(), fmt.Sprint("warm-up-", i), time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	return st
}
