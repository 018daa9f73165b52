package e2e

import (
	"slices"
	"testing"
	"time"
)

// TestMutex: six distinct updates of one purchase order are published
// over two topics, each pushed to its own example-run process, so up to
// four updates of the order arrive at once (the emulator pushes two at a
// time per subscription). /po-updates takes a Mutex on the po_id: every
// update must be applied exactly once, and the supplier, which spends
// 200 ms on each, must never see two updates of the order at the same
// time. The updates that find the order busy are nacked (503) and come
// back later.
func TestMutex(t *testing.T) {
	eachStore(t, func(t *testing.T, sc storeCase) {
		sup, f := setup(t, sc, 2, "2s", supplierOptions{Work: stall(200 * time.Millisecond)})
		da := newDoor(t, doorConfig{Route: "/po-updates", Pick: to(f.insts[0]), Supplier: sup})
		db := newDoor(t, doorConfig{Route: "/po-updates", Pick: to(f.insts[1]), Supplier: sup})
		b := newBroker(t)
		ta, tb := b.topic("po-updates-a"), b.topic("po-updates-b")
		b.push(ta, "po-updates-a", da.URL, defaultAckDeadline)
		b.push(tb, "po-updates-b", db.URL, defaultAckDeadline)

		// Each topic gets its three updates in one burst, so the emulator
		// pushes two of them at once.
		po := unique(t)
		ida := ta.publish(poUpdate(po, 0), poUpdate(po, 2), poUpdate(po, 4))
		idb := tb.publish(poUpdate(po, 1), poUpdate(po, 3), poUpdate(po, 5))
		settle(t, 60*time.Second, ida, da)
		settle(t, 60*time.Second, idb, db)

		exactlyOnce(t, sup, keysOf("po-update:", slices.Concat(ida, idb)))
		if n := sup.maxBusy(po); n != 1 {
			t.Errorf("the supplier saw %d updates of the purchase order at the same time; the Mutex must allow one", n)
		}
		if da.count(503)+db.count(503) == 0 {
			t.Error("no update was ever turned away (503): the updates never contended, so the Mutex was not exercised")
		}
		t.Logf("door a: %s; door b: %s", fmtCounts(da), fmtCounts(db))
	})
}
