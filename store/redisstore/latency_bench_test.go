package redisstore_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
)

// networkDelay is the one-way delay BenchmarkNetwork adds: a round trip of
// half a millisecond, as between a Cloud Run instance and a Memorystore
// instance in the same zone.
const networkDelay = 250 * time.Microsecond

// networkWorkers is how many messages BenchmarkNetwork keeps in flight:
// few enough that the proxy, which runs in the benchmark's own process on
// the same cores, keeps up with them, so that the round trips set the
// pace rather than the CPU.
const networkWorkers = 8

// BenchmarkNetwork is BenchmarkThroughput's Ratio with a Toxiproxy proxy
// in front of Redis that delays every byte by networkDelay each way. On
// loopback, Redis answers in microseconds and the figure is decided by CPU
// (one Redis thread sharing the cores with the client); with a network in
// between, a message costs two round trips either way and the ratio shows
// what remains of idemgate's cost when round trips dominate.
func BenchmarkNetwork(b *testing.B) {
	p := testenv.NewProxy(b, testenv.RedisAddr(b))
	p.Latency(b, testenv.Upstream, networkDelay)
	p.Latency(b, testenv.Downstream, networkDelay)
	idemgate, baseline := benchSetupAt(b, p.Addr)
	b.Run("Ratio", func(b *testing.B) { compare(b, networkWorkers, networkWorkers*64, idemgate, baseline) })
}
