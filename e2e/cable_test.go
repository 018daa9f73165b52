package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cable is a TCP proxy between example-run processes and a store, which a
// test can cut. While cut, it resets every open connection and every new
// one, as a network partition or a failover of a managed store looks to a
// client; the store behind it and its data stay as they were. It is safe
// for concurrent use.
type cable struct {
	Addr   string // host:port to give the clients instead of the store's
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and the copiers

	mu    sync.Mutex
	cut   bool                  // guarded by mu
	conns map[net.Conn]struct{} // both ends of every open pair; guarded by mu
}

// newCable starts a cable to target (host:port) for t, removed when t ends.
func newCable(t testing.TB, target string) *cable {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cable{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	c.wg.Go(c.accept)
	t.Cleanup(func() {
		ln.Close()
		c.setCut(true) // closes every connection, so the copiers return
		c.wg.Wait()
	})
	return c
}

func (c *cable) accept() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return // closed
		}
		c.mu.Lock()
		cut := c.cut
		c.mu.Unlock()
		if cut {
			reset(in)
			continue
		}
		out, err := net.Dial("tcp", c.target)
		if err != nil {
			reset(in)
			continue
		}
		c.mu.Lock()
		if c.cut { // cut while dialling
			c.mu.Unlock()
			reset(in)
			reset(out)
			continue
		}
		c.conns[in], c.conns[out] = struct{}{}, struct{}{}
		c.mu.Unlock()
		c.wg.Go(func() { c.pipe(in, out) })
		c.wg.Go(func() { c.pipe(out, in) })
	}
}

// pipe copies from src to dst until either end fails, then closes both.
func (c *cable) pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	c.mu.Lock()
	delete(c.conns, src)
	delete(c.conns, dst)
	c.mu.Unlock()
	reset(src)
	reset(dst)
}

// setCut cuts the cable (resetting every open connection) or mends it.
func (c *cable) setCut(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for conn := range c.conns {
			reset(conn)
		}
		clear(c.conns)
	}
}

// reset closes conn with a TCP reset rather than an orderly close.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
