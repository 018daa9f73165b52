package gateway_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/benchratio"
	"github.com/idemgate/idemgate/store/memstore"
)

func benchGateway(b *testing.B, renew bool, ttl time.Duration) *gateway.Gateway {
	st, _ := memstore.New(&memstore.Options{TTL: ttl})
	g, err := gateway.New(st, &gateway.Options{NoRenew: !renew})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func nop(context.Context) error { return nil }

// BenchmarkLock measures Lock on memstore, with and without lease renewal:
//
//   - Fresh: a key whose record expired (ttl 1ns), so every call wins,
//     runs and completes on a warm store of 64Ki keys: the gateway's own cost.
//   - FreshGrowing: a never-seen key per call, so the store grows to
//     millions of records: adds the cost of a growing map.
//   - Duplicate: a completed key: one Claim.
//   - FreshParallel: Fresh from every core.
func BenchmarkLock(b *testing.B) {
	ctx := context.Background()
	for _, renew := range []bool{false, true} {
		name := "NoRenew"
		if renew {
			name = "Renew"
		}
		b.Run(name+"/Fresh", func(b *testing.B) {
			g := benchGateway(b, renew, time.Nanosecond)
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = "m" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := g.Lock(ctx, keys[i&(1<<16-1)], nop); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(name+"/FreshGrowing", func(b *testing.B) {
			g := benchGateway(b, renew, 0)
			keys := make([]string, b.N)
			for i := range keys {
				keys[i] = "m" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := g.Lock(ctx, keys[i], nop); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/Duplicate", func(b *testing.B) {
			g := benchGateway(b, renew, 0)
			g.Lock(ctx, "dup", nop)
			b.ReportAllocs()
			for b.Loop() {
				g.Lock(ctx, "dup", nop)
			}
		})
		b.Run(name+"/FreshParallel", func(b *testing.B) {
			g := benchGateway(b, renew, time.Nanosecond)
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = "m" + strconv.Itoa(i)
			}
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := g.Lock(ctx, keys[n.Add(1)&(1<<16-1)], nop); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkLockRenewRatio measures what renewal costs a short body: fresh
// Locks with renewal armed (the default) against the same without it,
// alternated side by side (internal/benchratio) so both see the same
// noise. ratio is the renewing rate over the other; 0.8 means renewal
// makes a Lock 1.25 times as long. The caller's context is Background, as
// in BenchmarkLock, or one that can be cancelled, as a request's is: the
// body's context then registers with it.
func BenchmarkLockRenewRatio(b *testing.B) {
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "m" + strconv.Itoa(i)
	}
	for _, cancellable := range []bool{false, true} {
		for _, workers := range []int{1, 2} {
			name := "ctx=background/workers=" + strconv.Itoa(workers)
			if cancellable {
				name = "ctx=cancellable/workers=" + strconv.Itoa(workers)
			}
			b.Run(name, func(b *testing.B) {
				lock := func(g *gateway.Gateway) benchratio.Work {
					return func(ctx context.Context, i int64) error {
						if !cancellable {
							ctx = context.Background()
						}
						return g.Lock(ctx, keys[i&(1<<16-1)], nop)
					}
				}
				renew, norenew := benchGateway(b, true, time.Nanosecond), benchGateway(b, false, time.Nanosecond)
				benchratio.Compare(b, workers, 2048, lock(renew), lock(norenew))
			})
		}
	}
}
