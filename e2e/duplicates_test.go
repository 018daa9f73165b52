package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProducerRepublish: the producer publishes every order twice, the
// second time after the first was handled; each copy has a messageId of
// its own, and /orders, keyed on order_id, runs each order once.
func TestProducerRepublish(t *testing.T) {
	eachStore(t, func(t *testing.T, sc storeCase) {
		sup, f := setup(t, sc, 1, "", supplierOptions{})
		d := newDoor(t, doorConfig{Route: "/orders", Pick: to(f.insts[0]), Supplier: sup})
		b := newBroker(t)
		tp := b.topic("orders")
		b.push(tp, "orders-push", d.URL, defaultAckDeadline)

		msgs, keys := orders(t, 10)
		first := tp.publish(msgs...)
		eventually(t, 30*time.Second, func() error {
			if u := d.unacked(first); len(u) > 0 {
				return fmt.Errorf("%d orders of the first publish not acked yet", len(u))
			}
			return nil
		})
		second := tp.publish(msgs...)
		settle(t, 30*time.Second, slices.Concat(first, second), d)

		exactlyOnce(t, sup, keys)
		for _, id := range second {
			if h := d.history(id); h[0] != http.StatusNoContent {
				t.Errorf("republished message %s was answered %v; want 204 (duplicate) first", id, h)
			}
		}
	})
}

// TestConcurrentDuplicate: one topic, two push subscriptions, each pushing
// to its own example-run process; the two processes share the store. Every
// message reaches both processes at once. The supplier holds the first
// request of each message until the other process has answered its copy,
// so the copies really overlap: the other copy must be answered 503 (in
// progress, nack), and its redelivery 204 once the work is done. Messages
// are published one at a time, so that no held request can keep the other
// subscription from delivering the copy it waits for.
func TestConcurrentDuplicate(t *testing.T) {
	eachStore(t, func(t *testing.T, sc storeCase) {
		var doors atomic.Pointer[map[string]*door] // by the name of the process behind
		sup, f := setup(t, sc, 2, "2s", supplierOptions{
			Work: func(ctx context.Context, c call) {
				other := (*doors.Load())["b"]
				if strings.HasPrefix(c.Caller, "b/") {
					other = (*doors.Load())["a"]
				}
				id := strings.TrimPrefix(c.Key, "msg:")
				poll(ctx, 20*time.Second, func() error {
					if len(other.history(id)) == 0 {
						return errors.New("waiting")
					}
					return nil
				})
			},
		})
		da := newDoor(t, doorConfig{Route: "/", Pick: to(f.insts[0]), Supplier: sup})
		db := newDoor(t, doorConfig{Route: "/", Pick: to(f.insts[1]), Supplier: sup})
		doors.Store(&map[string]*door{"a": da, "b": db})
		b := newBroker(t)
		tp := b.topic("orders")
		b.push(tp, "orders-to-a", da.URL, defaultAckDeadline)
		b.push(tp, "orders-to-b", db.URL, defaultAckDeadline)

		msgs, _ := orders(t, 3)
		var ids []string
		for _, m := range msgs {
			id := tp.publish(m)[0]
			ids = append(ids, id)
			eventually(t, 30*time.Second, func() error {
				if len(da.unacked([]string{id}))+len(db.unacked([]string{id})) > 0 {
					return fmt.Errorf("message %s not acked through both subscriptions yet", id)
				}
				return nil
			})
		}
		settle(t, 30*time.Second, ids, da, db)

		exactlyOnce(t, sup, keysOf("msg:", ids))
		for _, id := range ids {
			ha, hb := da.history(id), db.history(id)
			loser := ha
			if sup.callers("msg:" + id)[0][0] == 'a' {
				loser = hb
			}
			if loser[0] != http.StatusServiceUnavailable || loser[len(loser)-1] != http.StatusNoContent {
				t.Errorf("message %s: the copy that lost was answered %v; want 503 (in progress) first and 204 (duplicate) last", id, loser)
			}
		}
		t.Logf("door a: %s; door b: %s", fmtCounts(da), fmtCounts(db))
	})
}

// TestDoubleSubscription: two push subscriptions on one topic deliver every
// message twice to the same service (a common mistake, or two consumers
// on purpose). The second copy arrives after the first was acknowledged,
// and the default key, the messageId, makes it a duplicate: 204, no work.
func TestDoubleSubscription(t *testing.T) {
	eachStore(t, func(t *testing.T, sc storeCase) {
		sup, f := setup(t, sc, 1, "", supplierOptions{})
		first := newDoor(t, doorConfig{Route: "/", Pick: to(f.insts[0]), Supplier: sup})
		second := newDoor(t, doorConfig{Route: "/", Pick: to(f.insts[0]), Supplier: sup,
			Gate: func(ctx context.Context, d delivery) {
				poll(ctx, 20*time.Second, func() error {
					if len(first.unacked([]string{d.ID})) > 0 {
						return errors.New("waiting")
					}
					return nil
				})
			},
		})
		b := newBroker(t)
		tp := b.topic("orders")
		b.push(tp, "orders", first.URL, defaultAckDeadline)
		b.push(tp, "orders-again", second.URL, defaultAckDeadline)

		msgs, _ := orders(t, 10)
		ids := tp.publish(msgs...)
		settle(t, 60*time.Second, ids, first, second)

		exactlyOnce(t, sup, keysOf("msg:", ids))
		for _, id := range ids {
			if h := second.history(id); !slices.Equal(h, []int{http.StatusNoContent}) {
				t.Errorf("message %s through the second subscription was answered %v; want [204]", id, h)
			}
		}
	})
}
