package gateway_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/benchratio"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// benchGateway is a gateway over memstore; with fresh set, every Claim of a
// key wins (see freshStore).
func benchGateway(b testing.TB, renew, fresh bool) *gateway.Gateway {
	var st store.Store = newFreshStore()
	if !fresh {
		st, _ = memstore.New(nil)
	}
	g, err := gateway.New(st, &gateway.Options{NoRenew: !renew})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func nop(context.Context) error { return nil }

// freshStore is a memstore whose Complete releases the claim instead (and
// answers true), so that every Claim of a key wins again: the gateway's
// cost on a fresh key, with a store operation in Complete's place that
// costs the same. (An expiring ttl cannot do it any more: a ttl shorter
// than the lease is refused.)
type freshStore struct{ *memstore.Store }

func newFreshStore() freshStore {
	st, _ := memstore.New(nil)
	return freshStore{st}
}

func (s freshStore) Complete(ctx context.Context, c store.Claim) (bool, error) {
	return true, s.Release(ctx, c)
}

// BenchmarkLock measures Lock on memstore, with and without lease renewal:
//
//   - Fresh: a key whose claim was released (freshStore), so every call wins,
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
			g := benchGateway(b, renew, true)
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
			g := benchGateway(b, renew, false)
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
			g := benchGateway(b, renew, false)
			g.Lock(ctx, "dup", nop)
			b.ReportAllocs()
			for b.Loop() {
				g.Lock(ctx, "dup", nop)
			}
		})
		b.Run(name+"/FreshParallel", func(b *testing.B) {
			g := benchGateway(b, renew, true)
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
				renew, norenew := benchGateway(b, true, true), benchGateway(b, false, true)
				benchratio.Compare(b, workers, 2048, lock(renew), lock(norenew))
			})
		}
	}
}
