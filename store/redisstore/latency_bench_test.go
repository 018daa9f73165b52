package redisstore_test

import (
	"testing"

	"github.com/idemgate/idemgate/internal/testenv"
)

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
