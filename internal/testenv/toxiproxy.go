package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// Proxy is a Toxiproxy proxy run inside the test process, between a client
// and a real server: give the client Addr instead of the server's address,
// then inject network faults ("toxics") in either direction. No toxiproxy
// binary or HTTP API is involved: the proxy and its toxics are driven
// through the toxiproxy package directly.
//
// Every connection the proxy closes is closed with a TCP reset (SO_LINGER
// 0), as a partition, a failover or a crashed peer looks to the other
// side; Toxiproxy alone does that only on connections opened while a
// reset_peer toxic was in place. A side effect: a connection the client
// closes reaches the server as a reset too.
//
// A Proxy is safe for concurrent use: faults may be added and removed
// while clients talk through it.
type Proxy struct {
	// Addr is the host:port clients dial to reach the server through the
	// proxy.
	Addr string

	p     *toxiproxy.Proxy
	names atomic.Int64 // numbers the toxics, so that each has its own name
}

// Stream is the direction of the bytes a toxic acts on.
type Stream string

// The two directions through a proxy.
const (
	Upstream   Stream = "upstream"   // from the client to the server: requests
	Downstream Stream = "downstream" // from the server to the client: replies
)

// NewProxy starts a proxy to upstream (host:port) for t, on a free port of
// 127.0.0.1. It is stopped, and every connection through it closed, when t
// ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	registerToxics.Do(func() { toxics.Register(latencyType, new(preciseLatency)) })
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := &Proxy{p: toxiproxy.NewProxy(srv, "idemgate-"+strings.ReplaceAll(t.Name(), "/", "-"), "127.0.0.1:0", upstream)}
	if err := px.p.Start(); err != nil {
		t.Fatalf("testenv: starting a proxy to %s: %v", upstream, err)
	}
	px.Addr = px.p.Listen
	t.Cleanup(px.p.Stop)
	// An idle reset_peer toxic (toxicity 0: it never fires) in each
	// direction makes Toxiproxy set SO_LINGER 0 on both ends of every
	// connection it opens, so that every close it makes is a reset.
	for _, s := range []Stream{Upstream, Downstream} {
		px.add(t, s, "reset_peer", 0, map[string]any{"timeout": 0})
	}
	return px
}

// Toxic is a fault in place on a proxy.
type Toxic struct {
	p    *Proxy
	name string
}

// Remove takes the toxic away: data flows again on the connections it was
// holding back, and new connections no longer meet it. Connections it
// already closed stay closed, and removing a Timeout closes the connections
// it was holding (Toxiproxy's rule). Removing a toxic twice does nothing. Remove
// may be called from any goroutine, a client's dial hook for example.
func (x *Toxic) Remove() {
	// The only possible error is that the toxic is gone already.
	_ = x.p.p.Toxics.RemoveToxic(context.Background(), x.name)
}

// Latency delays every chunk of data in direction s by d (microsecond
// resolution; Toxiproxy's own latency toxic counts whole milliseconds).
// Chunks keep their order, and a chunk that already waited in the proxy
// waits that much less, so the delay does not accumulate along a stream.
func (p *Proxy) Latency(t testing.TB, s Stream, d time.Duration) *Toxic {
	t.Helper()
	return p.add(t, s, latencyType, 1, map[string]any{"micros": d.Microseconds()})
}

// ResetPeer resets the connection, after a delay of after, as soon as data
// flows in direction s; that data is dropped. It applies to connections
// already open and to new ones.
func (p *Proxy) ResetPeer(t testing.TB, s Stream, after time.Duration) *Toxic {
	t.Helper()
	return p.add(t, s, "reset_peer", 1, map[string]any{"timeout": after.Milliseconds()})
}

// Timeout drops all data in direction s: the connection stays open but
// silent, as behind a dead route. With after > 0 the proxy also resets the
// connection once after has passed; with 0 it never does.
func (p *Proxy) Timeout(t testing.TB, s Stream, after time.Duration) *Toxic {
	t.Helper()
	return p.add(t, s, "timeout", 1, map[string]any{"timeout": after.Milliseconds()})
}

// LimitData lets n more bytes through in direction s on each connection,
// then resets the connection. LimitData(t, Downstream, 0) loses the next
// reply on every connection after the server has received, and acted on,
// the request.
func (p *Proxy) LimitData(t testing.TB, s Stream, n int64) *Toxic {
	t.Helper()
	return p.add(t, s, "limit_data", 1, map[string]any{"bytes": n})
}

// Cut resets every open connection through the proxy and refuses new
// ones until Restore: a network partition, or a failover of a managed
// store, as a client sees it. The server and its data are untouched.
func (p *Proxy) Cut() {
	p.p.Stop()
}

// Restore accepts connections again, on the same address, after Cut. The
// toxics in place before the cut still are.
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	if err := p.p.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		t.Errorf("testenv: restoring the proxy on %s: %v", p.Addr, err)
	}
}

// add puts a toxic of type typ with the given attributes in direction s.
func (p *Proxy) add(t testing.TB, s Stream, typ string, toxicity float32, attrs map[string]any) *Toxic {
	t.Helper()
	name := typ + "-" + string(s) + "-" + strconv.FormatInt(p.names.Add(1), 10)
	body, err := json.Marshal(map[string]any{
		"name": name, "type": typ, "stream": string(s), "toxicity": toxicity, "attributes": attrs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		t.Fatalf("testenv: adding toxic %s to the proxy: %v", name, err)
	}
	return &Toxic{p: p, name: name}
}

// latencyType is the name preciseLatency is registered under in
// Toxiproxy's registry of toxics, the only way to add a toxic of one's own.
const latencyType = "idemgate_latency"

// registerToxics registers preciseLatency once per process, when the
// first proxy starts (not in init, so that importing testenv changes
// nothing).
var registerToxics sync.Once

// preciseLatency is Toxiproxy's latency toxic with microseconds instead of
// milliseconds and no jitter: realistic in-zone round trips are well under
// a millisecond.
type preciseLatency struct {
	Micros int64 `json:"micros"`
}

// Pipe forwards each chunk once it is Micros old; see toxics.LatencyToxic.
func (l *preciseLatency) Pipe(stub *toxics.ToxicStub) {
	delay := time.Duration(l.Micros) * time.Microsecond
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			wait := time.NewTimer(delay - time.Since(c.Timestamp))
			select {
			case <-wait.C:
				stub.Output <- c
			case <-stub.Interrupt:
				wait.Stop()
				stub.Output <- c // never drop data when removed
				return
			}
		}
	}
}

// GetBufferSize lets chunks queue behind the one being delayed, as
// Toxiproxy's latency toxic does.
func (l *preciseLatency) GetBufferSize() int { return 1024 }

// NetworkDelay is a one-way delay for the network benchmarks.
type NetworkDelay struct {
	Name   string // a sub-benchmark name
	OneWay time.Duration
}

// NetworkDelays returns the one-way delays the network benchmarks put
// between a client and its server: 250µs, a round trip within a cloud
// zone, and 2ms, one across the zones of a region with some queueing.
func NetworkDelays() []NetworkDelay {
	return []NetworkDelay{{"250us", 250 * time.Microsecond}, {"2ms", 2 * time.Millisecond}}
}
