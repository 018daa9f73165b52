package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/benchratio"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

// The benchmarks compare one message through idemgate (Claim won, then
// Complete: two EVALSHA) with the cheapest two round trips that could mark
// a message on the same client: SET NX PX, then SET XX PX. Their ratio is
// what the guard costs over a hand-rolled marker. Records expire a minute
// after the run; nothing is left behind for longer.

const (
	benchWorkers = 64
	benchTTL     = 2 * time.Minute // longer than the lease, as the store requires
)

// message handles the message with the given unique key.
type message func(ctx context.Context, key string) error

// benchSetup returns the two ways to handle a message on one client.
func benchSetup(b *testing.B) (idemgate, baseline message) {
	return benchSetupAt(b, testenv.RedisAddr(b))
}

// benchSetupAt is benchSetup with a client of the server at addr.
func benchSetupAt(b *testing.B, addr string) (idemgate, baseline message) {
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: benchWorkers})
	b.Cleanup(func() { client.Close() })
	prefix := uniquePrefix(b)
	s, err := redisstore.New(b.Context(), client, &redisstore.Options{Prefix: prefix, TTL: benchTTL, Grace: -1})
	if err != nil {
		b.Fatal(err)
	}
	idemgate = func(ctx context.Context, key string) error {
		c, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{})
		if err != nil {
			return err
		}
		if c.Status != store.Won {
			return fmt.Errorf("Claim of a fresh key = %v, want won", c.Status)
		}
		_, err = s.Complete(ctx, c)
		return err
	}
	value := "C1:1795998054625:1799598054625:ABCDEFGHIJKLMNOPQRSTUVWXYZ" // as long as a claimed record
	baseline = func(ctx context.Context, key string) error {
		k := prefix + "baseline:" + key
		if err := client.SetArgs(ctx, k, value, redis.SetArgs{Mode: "NX", TTL: benchTTL}).Err(); err != nil {
			return err
		}
		return client.SetArgs(ctx, k, value, redis.SetArgs{Mode: "XX", TTL: benchTTL}).Err()
	}
	// Cache the scripts and open a connection per worker before timing
	// anything.
	ctx := b.Context()
	errs := make([]error, benchWorkers)
	var wg sync.WaitGroup
	for i := range benchWorkers {
		wg.Go(func() { errs[i] = idemgate(ctx, "warm-"+strconv.Itoa(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return idemgate, baseline
}

// BenchmarkThroughput handles messages from 64 concurrent workers; compare
// the msgs/s of Idemgate and Baseline.
func BenchmarkThroughput(b *testing.B) {
	idemgate, baseline := benchSetup(b)
	var seq atomic.Int64
	run := func(b *testing.B, handle message) {
		b.SetParallelism((benchWorkers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		ctx := b.Context()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := handle(ctx, "m"+strconv.FormatInt(seq.Add(1), 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	}
	b.Run("Idemgate", func(b *testing.B) { run(b, idemgate) })
	b.Run("Baseline", func(b *testing.B) { run(b, baseline) })
	// Ratio alternates the two in rounds (benchratio.Compare).
	b.Run("Ratio", func(b *testing.B) { compare(b, benchWorkers, benchWorkers*64, idemgate, baseline) })
}

// BenchmarkFloor compares idemgate with the floor, the raw commands on
// the same client, alternated in rounds (benchratio.Compare), at 1 and 32
// workers: Fresh is a message on a new key (Claim and Complete against SET
// NX PX and SET XX PX); Duplicate a Claim of a key already DONE against
// SET NX PX of a key already there, which writes nothing either.
func BenchmarkFloor(b *testing.B) {
	idemgate, baseline := benchSetup(b)
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b), PoolSize: benchWorkers})
	b.Cleanup(func() { client.Close() })
	prefix := uniquePrefix(b)
	s, err := redisstore.New(b.Context(), client, &redisstore.Options{Prefix: prefix, TTL: benchTTL, Grace: -1})
	if err != nil {
		b.Fatal(err)
	}
	const keys = 1024
	value := "D1:1795998054625:1799598054625:"
	for i := range keys {
		c, err := s.Claim(b.Context(), "d"+strconv.Itoa(i), time.Minute, store.ClaimOptions{})
		if err == nil {
			_, err = s.Complete(b.Context(), c)
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := client.Set(b.Context(), prefix+"floor:d"+strconv.Itoa(i), value, benchTTL).Err(); err != nil {
			b.Fatal(err)
		}
	}
	dupIdemgate := func(ctx context.Context, i int64) error {
		c, err := s.Claim(ctx, "d"+strconv.FormatInt(i%keys, 10), time.Minute, store.ClaimOptions{})
		if err == nil && c.Status != store.AlreadyDone {
			err = fmt.Errorf("duplicate Claim = %v, want already done", c.Status)
		}
		return err
	}
	dupBaseline := func(ctx context.Context, i int64) error {
		err := client.SetArgs(ctx, prefix+"floor:d"+strconv.FormatInt(i%keys, 10), value, redis.SetArgs{Mode: "NX", TTL: benchTTL}).Err()
		if err == nil {
			return errors.New("SET NX of a key already there succeeded")
		}
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	}
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("Fresh/Workers=%d/Ratio", workers), func(b *testing.B) {
			compare(b, workers, 32*workers, idemgate, baseline)
		})
		b.Run(fmt.Sprintf("Duplicate/Workers=%d/Ratio", workers), func(b *testing.B) {
			benchratio.Compare(b, workers, 32*workers, dupIdemgate, dupBaseline)
		})
	}
}

// compare runs benchratio.Compare on the two ways to handle a message,
// with workers goroutines in rounds of round messages.
func compare(b *testing.B, workers, round int, idemgate, baseline message) {
	keyed := func(handle message) benchratio.Work {
		return func(ctx context.Context, i int64) error { return handle(ctx, "r"+strconv.FormatInt(i, 10)) }
	}
	benchratio.Compare(b, workers, round, keyed(idemgate), keyed(baseline))
}

// BenchmarkLatency handles messages one at a time and reports the median
// and 99th percentile time per message.
func BenchmarkLatency(b *testing.B) {
	idemgate, baseline := benchSetup(b)
	var seq atomic.Int64
	run := func(b *testing.B, handle message) {
		ctx := b.Context()
		took := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := handle(ctx, "l"+strconv.FormatInt(seq.Add(1), 10)); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
	}
	b.Run("Idemgate", func(b *testing.B) { run(b, idemgate) })
	b.Run("Baseline", func(b *testing.B) { run(b, baseline) })
}

// networkWorkers is how many messages BenchmarkNetwork keeps in flight:
// few, so that the proxy, which runs in the benchmark's own process on the
// same cores, has CPU to spare and the round trips set the pace.
const networkWorkers = 8

// BenchmarkNetwork is BenchmarkThroughput's Ratio with a Toxiproxy proxy
// in front of Redis that delays every byte each way by 250µs (a round trip
// within a zone, Cloud Run to Memorystore) or by 2ms. On loopback, Redis
// answers in microseconds and the figure is decided by CPU (one Redis
// thread sharing the cores with the client); with a network in between, a
// message costs two round trips either way, and the ratio shows what
// remains of idemgate's cost when round trips dominate.
func BenchmarkNetwork(b *testing.B) {
	for _, d := range testenv.NetworkDelays() {
		b.Run(d.Name, func(b *testing.B) {
			p := testenv.NewProxy(b, testenv.RedisAddr(b))
			p.Latency(b, testenv.Upstream, d.OneWay)
			p.Latency(b, testenv.Downstream, d.OneWay)
			idemgate, baseline := benchSetupAt(b, p.Addr)
			b.Run("Ratio", func(b *testing.B) { compare(b, networkWorkers, networkWorkers*64, idemgate, baseline) })
		})
	}
}
