package testenv

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// echoServer answers every line it receives with the same line, and sends
// each line it received on got, so that a test knows what reached it.
type echoServer struct {
	addr string
	got  chan string
}

// newEchoServer starts one for t. It also checks, once everything t
// started has been cleaned up, that no goroutine of the proxy or the
// server is left behind.
func newEchoServer(t *testing.T) *echoServer {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{addr: ln.Addr().String(), got: make(chan string, 100)}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					e.got <- line
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return e
}

// dial connects to addr for t.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip sends line and reads the echo, within ten seconds.
func roundTrip(c net.Conn, r *bufio.Reader, line string) (string, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(line)); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// proxiedEcho starts an echo server and a proxy to it for t, and opens a
// connection through the proxy.
func proxiedEcho(t *testing.T) (*echoServer, *Proxy, net.Conn, *bufio.Reader) {
	t.Helper()
	e := newEchoServer(t)
	p := NewProxy(t, e.addr)
	c, r := dial(t, p.Addr)
	return e, p, c, r
}

// checkEchoes checks that a new connection to addr gets line echoed.
func checkEchoes(t *testing.T, addr, line, when string) {
	t.Helper()
	c, r := dial(t, addr)
	if got, err := roundTrip(c, r, line); got != line || err != nil {
		t.Errorf("round trip %s = %q, %v; want the echo", when, got, err)
	}
}

func TestProxyPassesData(t *testing.T) {
	_, p, _, _ := proxiedEcho(t)
	checkEchoes(t, p.Addr, "hello\n", "through the proxy")
}

func TestProxyLatency(t *testing.T) {
	_, p, c, r := proxiedEcho(t)
	const d = 5 * time.Millisecond
	p.Latency(t, Upstream, d)
	p.Latency(t, Downstream, d)
	start := time.Now()
	if _, err := roundTrip(c, r, "slow\n"); err != nil {
		t.Fatal(err)
	}
	// Only the lower bound is a rule; how much longer it takes depends on
	// the machine.
	if took := time.Since(start); took < 2*d {
		t.Errorf("round trip with %v each way took %v, want at least %v", d, took, 2*d)
	}
}

func TestProxyLimitDataLosesTheReply(t *testing.T) {
	e, p, c, r := proxiedEcho(t)
	x := p.LimitData(t, Downstream, 0)
	_, err := roundTrip(c, r, "applied\n")
	if got := <-e.got; got != "applied\n" {
		t.Fatalf("server received %q, want the request", got)
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading the lost reply = %v, want a connection reset", err)
	}
	x.Remove()
	x.Remove() // a second Remove does nothing
	checkEchoes(t, p.Addr, "again\n", "after Remove")
}

func TestProxyResetPeerDropsTheRequest(t *testing.T) {
	e, p, c, r := proxiedEcho(t)
	if _, err := roundTrip(c, r, "before\n"); err != nil { // an open connection
		t.Fatal(err)
	}
	<-e.got
	p.ResetPeer(t, Upstream, 0)
	if _, err := roundTrip(c, r, "dropped\n"); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("round trip on a connection opened before reset_peer = %v, want a connection reset", err)
	}
	select {
	case got := <-e.got:
		t.Errorf("server received %q through reset_peer, want nothing", got)
	default:
	}
}

func TestProxyTimeoutHoldsData(t *testing.T) {
	e, p, c, r := proxiedEcho(t)
	x := p.Timeout(t, Downstream, 0)
	c.Write([]byte("silent\n"))
	<-e.got // the request went through; its reply does not come back
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("reading behind a timeout toxic = %v, want the read deadline to pass", err)
	}
	x.Remove()
	// Toxiproxy closes the connections a timeout toxic held when it is
	// removed; new ones pass.
	checkEchoes(t, p.Addr, "heard\n", "after Remove")
}

func TestProxyCutAndRestore(t *testing.T) {
	_, p, c, r := proxiedEcho(t)
	if _, err := roundTrip(c, r, "before\n"); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if _, err := roundTrip(c, r, "during\n"); err == nil {
		t.Error("round trip on an open connection after Cut succeeded, want an error")
	}
	if c, err := net.Dial("tcp", p.Addr); err == nil {
		c.Close()
		t.Error("dialling the proxy after Cut succeeded, want a refusal")
	}
	p.Restore(t)
	checkEchoes(t, p.Addr, "after\n", "after Restore")
}
