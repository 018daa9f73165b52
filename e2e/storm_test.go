package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCrashStorm runs four example-run processes behind one front end (the
// doors pick a random live process for each push, as Cloud Run does) and
// pushes a stream of 500 orders through two subscriptions, 100 of them
// published twice, while the processes are SIGKILLed at random moments
// and started again, until everything is delivered. Some kills are timed
// by the supplier itself: it takes the order, then kills the process that
// sent it before answering, the one window no lock can close (the work
// happened, Complete did not). Leases are 2 s, so a key a dead process
// held frees quickly.
//
// At the end every order reached the supplier, no published message was
// left unacknowledged on either subscription, and an order reached the
// supplier more than once only after the process that sent it earlier was
// killed (or, on a machine too loaded to renew a lease in time, reported
// losing its claim): these are the re-sends the idempotent supplier
// absorbs, and the test logs how many there were.
func TestCrashStorm(t *testing.T) {
	eachStore(t, crashStorm)
}

func crashStorm(t *testing.T, sc storeCase) {
	const (
		nOrders      = 500
		nRepublished = 100
		nProcesses   = 4
		windowRate   = 0.03                   // share of first requests whose sender the supplier kills
		chaosFor     = 40 * time.Second       // kills stop by then even if messages are still unacked
		killEvery    = 300 * time.Millisecond // mean time between random kills
		batchSize    = 30                     // messages the producer publishes at a time
		batchEvery   = 200 * time.Millisecond // the producer's pace
	)
	downtime := func() time.Duration { return time.Duration(100+rand.IntN(300)) * time.Millisecond }

	var (
		fl          atomic.Pointer[fleet]
		chaos       atomic.Bool // kills happen only while set
		windowKills atomic.Int64
	)
	sup, f := setup(t, sc, nProcesses, "2s", supplierOptions{
		Work: func(ctx context.Context, c call) {
			if !chaos.Load() || c.Hit != 1 || rand.Float64() >= windowRate {
				return
			}
			if fl.Load().crashCaller(c.Caller, downtime()) {
				windowKills.Add(1)
			}
		},
	})
	fl.Store(f)
	da := newDoor(t, doorConfig{Route: "/orders", Pick: f.pick, Supplier: sup})
	db := newDoor(t, doorConfig{Route: "/orders", Pick: f.pick, Supplier: sup})
	b := newBroker(t)
	tp := b.topic("orders")
	b.push(tp, "orders-a", da.URL, defaultAckDeadline)
	b.push(tp, "orders-b", db.URL, defaultAckDeadline)

	// Random kills, until every order reached the supplier or chaosFor.
	var randomKills atomic.Int64
	chaosCtx, stopChaos := context.WithTimeout(t.Context(), chaosFor)
	defer stopChaos()
	var wg sync.WaitGroup
	chaos.Store(true)
	wg.Go(func() {
		for pause(chaosCtx, time.Duration(rand.Int64N(int64(2*killEvery)))) {
			if f.crash(f.insts[rand.IntN(len(f.insts))], anyLife, downtime()) {
				randomKills.Add(1)
			}
		}
	})

	start := time.Now()
	// The producer publishes a stream: every order, and a second copy of
	// some, in a random order, a batch at a time.
	msgs, keys := orders(t, nOrders)
	stream := append(slices.Clone(msgs), msgs[:nRepublished]...)
	rand.Shuffle(len(stream), func(i, j int) { stream[i], stream[j] = stream[j], stream[i] })
	var ids []string
	for batch := range slices.Chunk(stream, batchSize) {
		ids = append(ids, tp.publish(batch...)...)
		pause(t.Context(), batchEvery)
	}

	// The kills go on until both subscriptions have delivered everything.
	poll(chaosCtx, chaosFor, func() error {
		if len(da.unacked(ids))+len(db.unacked(ids)) > 0 {
			return errors.New("messages still unacked")
		}
		return nil
	})
	chaos.Store(false)
	stopChaos()
	wg.Wait()
	chaosTook := time.Since(start)

	// Every process comes back, and the emulator delivers what is left.
	eventually(t, 30*time.Second, f.allUp)
	sup.waitDone(t, keys, 60*time.Second)
	settle(t, 60*time.Second, ids, da, db)

	// An order may reach the supplier again only after the process that
	// sent it before was killed (the crash window), or reported that its
	// lease lapsed while the work ran (a machine too loaded to renew a 2 s
	// lease in time); never otherwise.
	resent, lapsed := 0, 0
	for _, k := range keys {
		callers := sup.callers(k)
		resent += len(callers) - 1
		for _, c := range callers[:len(callers)-1] {
			switch {
			case f.killedLife(c):
			case f.lostClaim(c, k):
				lapsed++
			default:
				t.Errorf("order %s reached the supplier %d times (from %v), but %s was neither killed nor lost its claim: a repeat without a cause", k, len(callers), callers, c)
			}
		}
	}
	raw, distinct := sup.totals()
	if distinct != nOrders {
		t.Errorf("the supplier saw %d distinct orders; want %d", distinct, nOrders)
	}
	t.Logf("%d orders (%d published twice) through 2 subscriptions to %d processes on %s; chaos for %v",
		nOrders, nRepublished, nProcesses, sc.name, chaosTook.Round(100*time.Millisecond))
	t.Logf("kills: %d at random moments, %d right after the supplier took an order (crash window), %d in all",
		randomKills.Load(), windowKills.Load(), f.kills())
	t.Logf("supplier: %d requests, %d distinct orders: %d re-sends absorbed by its Idempotency-Key (%d after the sender was killed between the supplier call and Complete, %d after a lapsed lease)",
		raw, distinct, resent, resent-lapsed, lapsed)
	t.Logf("door a: %s", fmtCounts(da))
	t.Logf("door b: %s", fmtCounts(db))
	if raw-distinct != resent {
		t.Errorf("raw requests − distinct orders = %d, but the per-order count of re-sends is %d", raw-distinct, resent)
	}
}

// allUp returns an error until every process of the fleet is serving.
func (f *fleet) allUp() error {
	for _, in := range f.insts {
		if in.url() == "" {
			return fmt.Errorf("example-run %s is down", in.name)
		}
	}
	return nil
}
