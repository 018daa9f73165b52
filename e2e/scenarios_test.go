package e2e

import (
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// eachStore runs scenario against every store, in parallel subtests.
func eachStore(t *testing.T, scenario func(t *testing.T, sc storeCase)) {
	t.Parallel()
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			scenario(t, sc)
			t.Logf("took %v", time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// setup starts a supplier and a fleet of n example-run processes on a
// fresh namespace of sc, with the given lease.
func setup(t *testing.T, sc storeCase, n int, lease string, opts supplierOptions) (*supplier, *fleet) {
	t.Helper()
	url, env := sc.open(t)
	sup := newSupplier(t, opts)
	return sup, newFleet(t, n, fleetConfig{Store: url, Env: env, Lease: lease, Supplier: sup})
}

// to returns a door's Pick that always forwards to in.
func to(in *instance) func() string { return in.url }

// orders returns n orders with IDs made unique to t, and their keys.
func orders(t *testing.T, n int) ([]*pubsub.Message, []string) {
	prefix := unique(t)
	msgs := make([]*pubsub.Message, n)
	keys := make([]string, n)
	for i := range n {
		id := prefix + "-" + itoa(i)
		msgs[i], keys[i] = order(id), "order_id:"+id
	}
	return msgs, keys
}

// keysOf returns the keys example-run gives the messages ids on route "/"
// (messageId) or "/po-updates".
func keysOf(prefix string, ids []string) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = prefix + id
	}
	return keys
}

// exactlyOnce fails t unless the supplier got exactly one request for each
// key.
func exactlyOnce(t *testing.T, sup *supplier, keys []string) {
	t.Helper()
	for _, k := range keys {
		if n := sup.hits(k); n != 1 {
			t.Errorf("key %s reached the supplier %d times (callers %v); want exactly once", k, n, sup.callers(k))
		}
	}
}

// fmtCounts formats a door's notable answer counts for the log.
func fmtCounts(d *door) string {
	return fmt.Sprintf("%d deliveries: %d acked 200, %d acked 204 (duplicate), %d nacked (503 %d, 500 %d, 502 %d)",
		d.deliveries(), d.count(200), d.count(204), d.nacks(), d.count(503), d.count(500), d.count(502))
}
