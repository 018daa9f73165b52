package googletest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
)

// The benchmarks run against an emulator, whose speed says little about
// the production service: they compare operations with each other and
// catch regressions in round trips, nothing more. Each takes a store from
// WarmUp.

// WarmUp makes 20 claims on st, so that the first timed call pays for
// neither dialing nor the emulator's JIT compilation, and returns st.
func WarmUp(b *testing.B, st Store) Store {
	for i := range 20 {
		if _, err := st.Claim(b.Context(), fmt.Sprint("warm-up-", i), time.Minute, store.ClaimOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchClaim claims fresh keys one after another.
func BenchClaim(b *testing.B, st Store) {
	ctx := b.Context()
	i := 0
	for b.Loop() {
		i++
		if _, err := st.Claim(ctx, fmt.Sprint("m", i), time.Minute, store.ClaimOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchClaimParallel claims fresh keys from many goroutines.
func BenchClaimParallel(b *testing.B, st Store) {
	ctx := b.Context()
	var n atomic.Int64
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := st.Claim(ctx, fmt.Sprint("m", n.Add(1)), time.Minute, store.ClaimOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchMessage is the store's work for one fresh message: Claim, then
// Complete.
func BenchMessage(b *testing.B, st Store) {
	ctx := b.Context()
	i := 0
	for b.Loop() {
		i++
		c, err := st.Claim(ctx, fmt.Sprint("m", i), time.Minute, store.ClaimOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Complete(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchDuplicate claims a key that is already DONE.
func BenchDuplicate(b *testing.B, st Store) {
	ctx := b.Context()
	c, err := st.Claim(ctx, "done", time.Minute, store.ClaimOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Complete(ctx, c); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		d, err := st.Claim(ctx, "done", time.Minute, store.ClaimOptions{})
		if err != nil || d.Status != store.AlreadyDone {
			b.Fatal(d.Status, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchRelay commits n messages of 256 bytes (unordered, 100 per
// transaction) to w's outbox, then times one relay draining them into an
// in-process Pub/Sub fake (pstest), from its start to the Settle of the
// last, and reports its rate and the store's RPCs per message during the
// drain (counted by wire, the client's interceptor). The emulator's speed
// says little about production; the RPCs per message carry over.
func BenchRelay(b *testing.B, w OutboxWorld, wire *Wire, n int) {
	ctx := b.Context()
	srv, ps := fakepubsub.New(b)
	topic := fakepubsub.Topic
	data := bytes.Repeat([]byte("x"), 256)
	var rate, rpcs float64
	for run := range b.N {
		b.StopTimer()
		for first := 0; first < n; first += 100 {
			c, err := w.Store.Claim(ctx, fmt.Sprintf("relay-%d-%d", run, first), time.Minute, store.ClaimOptions{})
			if err != nil || c.Status != store.Won {
				b.Fatal(c, err)
			}
			msgs := make([]outbox.Message, 0, 100)
			for range min(100, n-first) {
				msgs = append(msgs, outbox.Message{Topic: topic, Data: data})
			}
			if err := w.Complete(ctx, c, nil, msgs...); err != nil {
				b.Fatal(err)
			}
		}
		srv.ClearMessages()
		wire.Take()
		b.StartTimer()
		src := &drained{Source: w.Source, left: int64(n), done: make(chan struct{})}
		r, err := relay.New(src, ps, &relay.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		start := time.Now()
		go func() { stopped <- r.Run(rctx) }()
		select {
		case <-src.done:
		case err := <-stopped:
			b.Fatalf("the relay stopped: %v", err)
		case <-time.After(5 * time.Minute):
			b.Fatalf("the relay did not drain %d messages in 5 minutes", n)
		}
		elapsed := time.Since(start)
		cancel()
		<-stopped
		rate += float64(n) / elapsed.Seconds()
		rpcs += float64(len(wire.Take())) / float64(n)
	}
	b.ReportMetric(rate/float64(b.N), "msgs/s")
	b.ReportMetric(rpcs/float64(b.N), "rpcs/msg")
}

// drained closes done once left messages were settled as sent.
type drained struct {
	relay.Source
	mu   sync.Mutex
	left int64
	done chan struct{}
}

func (d *drained) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	if err := d.Source.Settle(ctx, sent, failed); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.left > 0 && d.left <= int64(len(sent)) {
		close(d.done)
	}
	d.left -= int64(len(sent))
	return nil
}
