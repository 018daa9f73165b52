package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testenv"
)

// outageFor is how long the store stays unreachable.
const outageFor = 3 * time.Second

// TestStoreOutage: the store becomes unreachable for a few seconds while
// orders are being handled, then comes back with its data. A delivery
// that cannot reach the store must not be acknowledged: it is nacked (the
// Redis client gives up and the gateway answers 503) or it waits for the
// store (the Datastore client's calls wait for the connection, up to 60 s),
// and either way every order still reaches the supplier. Because the store forgot
// nothing, no order may run twice after it recovers.
//
// The outage must keep the data: a store that loses its records (a
// diskless Redis restarted, say) makes a redelivery of a finished message
// run again, which is the correct behaviour of a store that forgot, not a
// failure of the guard. So each store gets the outage it can survive:
//
//   - redis: a private redis-server that appends every write to its AOF
//     and fsyncs it before answering is SIGKILLed, so clients get
//     connection refused, and started again on the same port: a crash and
//     restart of the store process itself, with nothing lost.
//   - datastore: the processes reach the emulator through a Toxiproxy
//     proxy (testenv.NewProxy) that is cut (every connection reset, new
//     ones refused) and restored: a network partition, as a client of the
//     managed service would see an outage. The emulator keeps its data only in memory, so it is not
//     restarted.
func TestStoreOutage(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		r := startDurableRedis(t)
		storeOutage(t, "redis://"+r.addr+"/0?prefix="+unique(t)+":", nil, r.crash, r.start)
	})
	t.Run("datastore", func(t *testing.T) {
		t.Parallel()
		p := testenv.NewProxy(t, testenv.DatastoreEmulatorHost(t))
		storeOutage(t, "datastore://idemgate-e2e?namespace="+unique(t), []string{"DATASTORE_EMULATOR_HOST=" + p.Addr},
			p.Cut, func() { p.Restore(t) })
	})
}

// storeOutage publishes 300 orders to two processes on store, half of them
// during an outage that down begins and up ends.
func storeOutage(t *testing.T, store string, env []string, down, up func()) {
	start := time.Now()
	sup := newSupplier(t, supplierOptions{})
	f := newFleet(t, 2, fleetConfig{Store: store, Env: env, Lease: "2s", Supplier: sup})
	d := newDoor(t, doorConfig{Route: "/orders", Pick: f.pick, Supplier: sup})
	b := newBroker(t)
	tp := b.topic("orders")
	b.push(tp, "orders-push", d.URL, defaultAckDeadline)

	msgs, keys := orders(t, 300)
	ids := tp.publish(msgs[:150]...)
	// The outage begins while the first orders are being handled.
	eventually(t, 30*time.Second, func() error {
		if n := 150 - len(sup.missing(keys[:150])); n < 50 {
			return fmt.Errorf("%d of 150 orders done before the outage; waiting for 50", n)
		}
		return nil
	})
	down()
	nacked := d.nacks()
	ids = append(ids, tp.publish(msgs[150:]...)...)
	pause(t.Context(), outageFor)
	nacked, waiting := d.nacks()-nacked, d.waiting()
	up()

	sup.waitDone(t, keys, 60*time.Second)
	settle(t, 60*time.Second, ids, d)
	exactlyOnce(t, sup, keys)
	if nacked+waiting == 0 {
		t.Errorf("no delivery was nacked during the %v outage, nor waiting for the store at its end: the outage went unnoticed", outageFor)
	}
	t.Logf("during the %v outage: %d deliveries nacked, %d waiting for the store when it came back", outageFor, nacked, waiting)
	t.Logf("%s; took %v", fmtCounts(d), time.Since(start).Round(100*time.Millisecond))
}

// durableRedis is a private redis-server that appends every write to its
// AOF and fsyncs it before answering, so it can be SIGKILLed and started
// again on the same port without losing a record.
type durableRedis struct {
	t    testing.TB
	bin  string
	dir  string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// startDurableRedis starts one for t, stopped when t ends.
func startDurableRedis(t testing.TB) *durableRedis {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "redis-server (apt install redis-server): %v", err)
	}
	r := &durableRedis{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(r.crash)
	for range 3 {
		port, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		r.addr = net.JoinHostPort("127.0.0.1", itoa(port))
		if err = r.launch(); err == nil {
			return r
		}
	}
	testenv.Unavailable(t, "redis-server with an AOF: %v", err)
	return nil
}

// start starts the server again on its port, with the data it had.
func (r *durableRedis) start() {
	if err := r.launch(); err != nil {
		r.t.Errorf("restarting redis-server: %v", err)
	}
}

func (r *durableRedis) launch() error {
	_, port, _ := net.SplitHostPort(r.addr)
	cmd, done, err := testenv.Start(r.dir, r.addr, 10*time.Second, r.bin,
		"--port", port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		return err
	}
	r.cmd, r.done = cmd, done
	return nil
}

// crash SIGKILLs the server and waits for it to exit.
func (r *durableRedis) crash() {
	if r.cmd == nil {
		return
	}
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) // testenv.Start gives it its own process group
	<-r.done
	r.cmd = nil
}
