// Package benchratio measures a piece of work against its baseline side by
// side, for the benchmarks whose figure is a ratio (docs/benchmarks.md).
package benchratio

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Work handles item i, a number no other call in the process has been
// given.
type Work func(ctx context.Context, i int64) error

// next numbers the items of every Compare in the process: a benchmark
// function runs several times, and each item must stay fresh.
var next atomic.Int64

// Compare runs subject and baseline for b.N items each, in alternating
// rounds of round items spread over workers goroutines, after one untimed
// round of each that warms both up (connections, prepared statements,
// caches). Within each pair of rounds the order flips, so that neither
// always follows the other: a round that leaves work behind (dirty pages, a
// garbage collection) charges both alike, as does a neighbour's load that
// comes and goes. It reports both rates in items/s and their ratio, subject
// over baseline.
func Compare(b *testing.B, workers, round int, subject, baseline Work) {
	ctx := b.Context()
	work := [2]Work{subject, baseline}
	var (
		took [2]time.Duration
		done [2]int
	)
	runRound := func(k, n int) time.Duration {
		var (
			count atomic.Int64
			wg    sync.WaitGroup
		)
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for count.Add(1) <= int64(n) {
					if err := work[k](ctx, next.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	for k := range 2 {
		runRound(k, round)
	}
	b.ResetTimer()
	for pair := 0; done[0] < b.N || done[1] < b.N; pair++ {
		for j := range 2 {
			k := j ^ (pair & 1)
			n := min(round, b.N-done[k])
			if n == 0 {
				continue
			}
			took[k] += runRound(k, n)
			done[k] += n
		}
	}
	rate := func(k int) float64 { return float64(done[k]) / took[k].Seconds() }
	b.ReportMetric(rate(0), "subject/s")
	b.ReportMetric(rate(1), "baseline/s")
	b.ReportMetric(rate(0)/rate(1), "ratio")
}
