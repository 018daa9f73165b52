package googletest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// The benchmarks run against an emulator, whose speed says little about
// the production service: they compare operations with each other and
// catch regressions in round trips, nothing more. Each takes a store from
// WarmUp.

// WarmUp makes 20 claims on st, so that the first timed call pays for
// neither dialing nor the emulator's JIT compilation, and returns st.
func WarmUp(b *testing.B, st Store) Store {
	for i := range 20 {
		if _, err := st.Claim(b.Context(), fmt.Sprint("warm-up-", i), time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchClaim claims fresh keys one after another.
func BenchClaim(b *testing.B, st Store) {
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

// BenchClaimParallel claims fresh keys from many goroutines.
func BenchClaimParallel(b *testing.B, st Store) {
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

// BenchMessage is the store's work for one fresh message: Claim, then
// Complete.
func BenchMessage(b *testing.B, st Store) {
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

// BenchDuplicate claims a key that is already DONE.
func BenchDuplicate(b *testing.B, st Store) {
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
