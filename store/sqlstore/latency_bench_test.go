package sqlstore_test

import (
	"testing"

	"github.com/idemgate/idemgate/internal/testenv"
)

// networkWorkers is how many messages the BenchmarkNetwork benchmarks keep
// in flight: few, so that the proxy, which runs in the benchmark's own
// process on the same cores, has CPU to spare and the round trips set the
// pace.
const networkWorkers = 8

// BenchmarkNetworkPostgreSQL is BenchmarkPostgreSQL with a Toxiproxy proxy
// in front of the server that delays every byte each way by 250µs (a round
// trip within a zone, Cloud Run to Cloud SQL) or by 2ms, so that round
// trips, not the CPU of a loopback server, set the pace.
func BenchmarkNetworkPostgreSQL(b *testing.B) { benchmarkNetwork(b, postgresBackend) }

// BenchmarkNetworkMariaDB is BenchmarkMariaDB behind the same proxy.
func BenchmarkNetworkMariaDB(b *testing.B) { benchmarkNetwork(b, mariadbBackend) }

func benchmarkNetwork(b *testing.B, be backend) {
	for _, d := range testenv.NetworkDelays() {
		b.Run(d.Name, func(b *testing.B) {
			pr := newProxied(b, be)
			pr.proxy.Latency(b, testenv.Upstream, d.OneWay)
			pr.proxy.Latency(b, testenv.Downstream, d.OneWay)
			benchmarkMessagesOn(b, be, openDB(b, pr.c, networkWorkers), networkWorkers, 64*networkWorkers)
		})
	}
}
