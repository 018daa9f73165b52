package sqlstore_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
)

// networkDelay is the one-way delay the BenchmarkNetwork benchmarks add: a
// round trip of half a millisecond, as between a Cloud Run instance and a
// Cloud SQL instance in the same zone.
const networkDelay = 250 * time.Microsecond

// networkWorkers is how many messages the BenchmarkNetwork benchmarks keep
// in flight: few enough that the proxy, which runs in the benchmark's own
// process on the same cores, keeps up with them, so that the round trips
// set the pace rather than the CPU.
const networkWorkers = 8

// BenchmarkNetworkPostgreSQL is BenchmarkPostgreSQL with a Toxiproxy proxy
// in front of the server that delays every byte by networkDelay each way,
// so that round trips, not the CPU of a loopback server, set the pace.
func BenchmarkNetworkPostgreSQL(b *testing.B) { benchmarkNetwork(b, postgresBackend) }

// BenchmarkNetworkMariaDB is BenchmarkMariaDB behind the same proxy.
func BenchmarkNetworkMariaDB(b *testing.B) { benchmarkNetwork(b, mariadbBackend) }

func benchmarkNetwork(b *testing.B, be backend) {
	pr := newProxied(b, be)
	pr.proxy.Latency(b, testenv.Upstream, networkDelay)
	pr.proxy.Latency(b, testenv.Downstream, networkDelay)
	benchmarkMessagesOn(b, be, openDB(b, pr.c, networkWorkers), networkWorkers, 64*networkWorkers)
}
