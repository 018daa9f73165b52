package googletest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
)

// The zombie storm: every message is delivered several times at once to a
// gateway whose leases are short and never renewed, and a third of the
// bodies stall past their lease, so that another delivery takes the key
// over while the stalled holder (the zombie) is still going to write.
const (
	stormCopies  = 4  // concurrent deliveries per message
	stormWorkers = 64 // deliveries under way at most, waiting ones included
	// The gateway's lease, not renewed. It must outlast the emulator's
	// slowest answer under the storm, or the gateway rightly refuses to
	// start a body on a claim that may have lapsed, and no message gets
	// done: on a loaded host the emulators answered Claims in up to 960 ms
	// under 64 workers (a 100 ms lease starved the storm).
	stormLease = 1500 * time.Millisecond
	stallMin   = 2 * time.Second // a stalled body pauses stallMin…stallMax, past its lease
	stallMax   = 3 * time.Second
	maxTries   = 200 // Lock calls per delivery before the storm gives up on it
)

// StormStats counts what happened in a storm.
type StormStats struct {
	Bodies  int64 // bodies that ran
	Stalled int64 // of which stalled past their lease
	Fenced  int64 // bodies whose sink refused them with store.ErrFenced
	Retries int64 // Lock calls that met a live holder or failed, and were tried again
}

// Storm delivers each message of msgs stormCopies times at once through a
// gateway over st: each delivery calls Lock with the message as key and a
// body that may stall and then calls sink. Like
// Pub/Sub, a delivery that meets a live holder, or fails, is delivered
// again (after the holder's lease, or a short pause) until its Lock ends
// with nil or ErrDuplicate, or its body's sink returns an error matching
// store.ErrFenced. seed drives which bodies stall and for how long.
func Storm(t *testing.T, st store.Store, msgs []string, seed uint64, sink func(ctx context.Context, msg string) error) StormStats {
	t.Helper()
	g, err := gateway.New(st, &gateway.Options{
		NoRenew: true,
		Lease:   stormLease,
		// Zombies' fenced-out Completes are logged at ERROR: expected here.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex // guards rng
		rng   = rand.New(rand.NewPCG(seed, seed))
		stats StormStats
	)
	// draw returns a stall (zero for most bodies) and a jitter for retries.
	draw := func() (stall, jitter time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(3) == 0 {
			stall = stallMin + time.Duration(rng.Int64N(int64(stallMax-stallMin)))
		}
		return stall, time.Duration(rng.Int64N(int64(20 * time.Millisecond)))
	}
	deliver := func(ctx context.Context, msg string) error {
		body := func(ctx context.Context) error {
			atomic.AddInt64(&stats.Bodies, 1)
			if stall, _ := draw(); stall > 0 {
				atomic.AddInt64(&stats.Stalled, 1)
				time.Sleep(stall) // the holder stalls (GC, a slow call) past its lease
			}
			err := sink(ctx, msg)
			if errors.Is(err, store.ErrFenced) {
				atomic.AddInt64(&stats.Fenced, 1)
			}
			return err
		}
		var last error
		for range maxTries {
			err := g.Lock(ctx, msg, body)
			if err == nil || errors.Is(err, gateway.ErrDuplicate) {
				return nil // acked: a fenced-out body is acked by Lock itself when the work is done
			}
			last = err
			atomic.AddInt64(&stats.Retries, 1)
			_, wait := draw()
			var held *gateway.InProgressError
			if errors.As(err, &held) {
				wait += time.Until(held.LeaseUntil) // Pub/Sub redelivers; the key frees then
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		return fmt.Errorf("message %s still not done after %d deliveries: %w", msg, maxTries, last)
	}

	start := time.Now()
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range stormWorkers {
		wg.Go(func() {
			for msg := range jobs {
				if err := deliver(t.Context(), msg); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, msg := range msgs {
		for range stormCopies {
			jobs <- msg
		}
	}
	close(jobs)
	wg.Wait()
	t.Logf("%d messages delivered in %v: %+v", len(msgs), time.Since(start).Round(time.Millisecond), stats)
	return stats
}

// Messages returns n message IDs.
func Messages(n int) []string {
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("msg-%04d", i)
	}
	return msgs
}

// Seed returns flagged, or a seed from the clock when it is zero, and logs
// the seed with how to run the test again on it.
func Seed(t *testing.T, flagged uint64, flag string) uint64 {
	t.Helper()
	seed := flagged
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (run again with -%s=%d)", seed, flag, seed)
	return seed
}

// CheckLedger checks the ledger a storm's sink wrote: count holds how many
// entries each message got. Every message needs one at least, since every
// delivery ended done. A sink that completes in the ledger's transaction
// (transactional) must have written exactly one per message, and the
// storm must have fenced out at least one body, or it proved nothing; a
// plain sink must show duplicates, or the storm could not tell the two
// apart.
func CheckLedger(t *testing.T, msgs []string, count map[string]int, stats StormStats, transactional bool) {
	t.Helper()
	entries, extra := 0, 0
	for _, msg := range msgs {
		n := count[msg]
		if n == 0 {
			t.Errorf("message %s has no ledger entry, though every delivery ended done", msg)
		}
		entries += n
		extra += max(n-1, 0)
		delete(count, msg)
	}
	for msg := range count {
		t.Errorf("ledger entry for %q, which was never delivered", msg)
	}
	t.Logf("%d ledger entries for %d messages: %d duplicates", entries, len(msgs), extra)
	switch {
	case transactional && extra > 0:
		t.Errorf("%d duplicate ledger entries with the completion in the ledger's transaction, want none: a zombie's transaction committed", extra)
	case transactional && stats.Fenced == 0:
		t.Error("no body was fenced out: the storm made no zombie, so it proved nothing")
	case !transactional && extra == 0:
		t.Error("no duplicate ledger entry without the completion in the transaction: the storm cannot tell a fenced sink from a plain one")
	}
}
