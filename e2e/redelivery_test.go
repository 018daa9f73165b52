package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestTransportRedelivery: the first delivery's answer is lost after the
// work was done, so Pub/Sub delivers the message again.
func TestTransportRedelivery(t *testing.T) {
	t.Run("slow", func(t *testing.T) { eachStore(t, redeliverSlow) })
	t.Run("crash", func(t *testing.T) { eachStore(t, redeliverAfterCrash) })
}

// redeliverSlow: the supplier takes longer than the subscription's ack
// deadline, so the emulator redelivers while the first delivery is still
// working. The gateway answers the copy 503 while the lease (renewed) is
// held, then 204 once the work is done; the supplier hears of it once.
//
// The lease is renewed every third of its length, and the work is
// cancelled when a renewal misses the last sixth. A 10 s lease leaves a
// renewal seconds; a 2 s one leaves it one second, which was seen to run
// out against the Datastore emulator while the machine was busy.
func redeliverSlow(t *testing.T, sc storeCase) {
	const ackDeadline = 2 * time.Second // the emulator accepts less than the real minimum of 10 s
	sup, f := setup(t, sc, 1, "10s", supplierOptions{
		Work: func(ctx context.Context, c call) {
			if c.Hit == 1 {
				pause(ctx, 2*ackDeadline+time.Second)
			}
		},
	})
	d := newDoor(t, doorConfig{Route: "/", Pick: to(f.insts[0]), Supplier: sup})
	b := newBroker(t)
	tp := b.topic("orders")
	b.push(tp, "orders-push", d.URL, ackDeadline)

	ids := tp.publish(order("slow-1"))
	settle(t, 30*time.Second, ids, d)

	exactlyOnce(t, sup, keysOf("msg:", ids))
	h := d.history(ids[0])
	if len(h) < 2 {
		t.Fatalf("message delivered %d times (answers %v); the emulator should have redelivered it after the %v ack deadline", len(h), h, ackDeadline)
	}
	// The first delivery ends with 200; each copy must be turned away.
	copies := slices.DeleteFunc(slices.Clone(h), func(s int) bool { return s == http.StatusOK })
	if len(copies) != len(h)-1 || slices.ContainsFunc(copies, func(s int) bool { return s != http.StatusServiceUnavailable && s != http.StatusNoContent }) {
		t.Errorf("answers %v; want one 200 (the first delivery) and 503 (in progress) or 204 (duplicate) for every copy", h)
	}
	t.Logf("deliveries of the one message (status@arrived-answered): %v", d.story(ids[0]))
}

// redeliverAfterCrash: the process is SIGKILLed after the supplier got the
// request and before it answered, so Complete never happens. The
// redelivery waits out the lease (2 s), takes the key over and sends the
// order again with the same Idempotency-Key: two raw requests, one
// distinct key, which the idempotent supplier absorbs.
func redeliverAfterCrash(t *testing.T, sc storeCase) {
	var fl atomic.Pointer[fleet]
	sup, f := setup(t, sc, 1, "2s", supplierOptions{
		Work: func(ctx context.Context, c call) {
			if c.Hit == 1 {
				fl.Load().crashCaller(c.Caller, 100*time.Millisecond)
			}
		},
	})
	fl.Store(f)
	d := newDoor(t, doorConfig{Route: "/", Pick: to(f.insts[0]), Supplier: sup})
	b := newBroker(t)
	tp := b.topic("orders")
	b.push(tp, "orders-push", d.URL, defaultAckDeadline)

	ids := tp.publish(order("crash-1"))
	settle(t, 30*time.Second, ids, d)

	key := "msg:" + ids[0]
	callers := sup.callers(key)
	if len(callers) != 2 || callers[0] != "a/0" || callers[1] != "a/1" {
		t.Errorf("supplier requests for %s came from %v; want [a/0 a/1]: the killed life, then the restarted one re-sending", key, callers)
	}
	if raw, distinct := sup.totals(); distinct != 1 {
		t.Errorf("supplier saw %d distinct keys (%d requests); want 1", distinct, raw)
	}
	t.Logf("deliveries of the one message (status@arrived-answered): %v", d.story(ids[0]))
}

// TestNackThenSucceed: the supplier fails the first two requests of every
// order; each failure is a nack, the emulator redelivers, and the third
// attempt succeeds. Nothing is marked done before it succeeded.
func TestNackThenSucceed(t *testing.T) {
	eachStore(t, func(t *testing.T, sc storeCase) {
		const failFirst = 2
		sup, f := setup(t, sc, 1, "", supplierOptions{FailFirst: failFirst})
		d := newDoor(t, doorConfig{Route: "/", Pick: to(f.insts[0]), Supplier: sup})
		b := newBroker(t)
		tp := b.topic("orders")
		b.push(tp, "orders-push", d.URL, defaultAckDeadline)

		msgs, _ := orders(t, 4)
		ids := tp.publish(msgs...)
		settle(t, 60*time.Second, ids, d)

		for _, id := range ids {
			key := "msg:" + id
			if hits, ok := sup.hits(key), sup.accepted(key); hits != failFirst+1 || ok != 1 {
				t.Errorf("key %s: %d requests, %d done; want %d requests (%d refused, then one done)", key, hits, ok, failFirst+1, failFirst)
			}
			h := d.history(id)
			if n := len(h); n < failFirst+1 || slices.ContainsFunc(h[:failFirst], acked) {
				t.Errorf("message %s was answered %v; want %d nacks, then an ack", id, h, failFirst)
			}
		}
	})
}

// TestPoisonRedelivered: the supplier refuses one order for good (422),
// which example-run's Terminal classifier takes for a permanent failure
// (IDEMGATE_TERMINAL=supplier-4xx). Its key goes FAILED on the first
// attempt, and every redelivery the emulator makes of it is answered 422
// without calling the supplier again; the other orders complete as usual.
func TestPoisonRedelivered(t *testing.T) {
	eachStore(t, func(t *testing.T, sc storeCase) {
		msgs, keys := orders(t, 3)
		poison := keys[0]
		url, env := sc.open(t)
		sup := newSupplier(t, supplierOptions{Refuse: func(key string) bool { return key == poison }})
		f := newFleet(t, 1, fleetConfig{Store: url, Env: append(env, "IDEMGATE_TERMINAL=supplier-4xx", "IDEMGATE_MAX_ATTEMPTS=3"), Supplier: sup})
		d := newDoor(t, doorConfig{Route: "/orders", Pick: to(f.insts[0]), Supplier: sup})
		b := newBroker(t)
		tp := b.topic("orders")
		b.push(tp, "orders-push", d.URL, defaultAckDeadline)

		ids := tp.publish(msgs...)
		eventually(t, 60*time.Second, func() error {
			if u := d.unacked(ids[1:]); len(u) > 0 {
				return fmt.Errorf("%d good orders not acked yet", len(u))
			}
			if n := len(d.history(ids[0])); n < 3 {
				return fmt.Errorf("the poison order was delivered %d times; waiting for 3", n)
			}
			return nil
		})
		exactlyOnce(t, sup, keys)
		if h := d.history(ids[0]); slices.ContainsFunc(h, func(s int) bool { return s != http.StatusUnprocessableEntity }) {
			t.Errorf("the poison order was answered %v; want 422 every time (FAILED, the supplier not called again)", h)
		}
		if sup.accepted(poison) != 0 {
			t.Errorf("the supplier accepted the poison order")
		}
	})
}
