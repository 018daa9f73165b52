package sim_test

import (
	"context"
	"crypto/rand"
	"errors"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/internal/sim"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
	"github.com/idemgate/idemgate/store/firestorestore"
)

// The Google stores decide on the client, on the clock of the process
// that writes: their pipeline runs complete each parent on one of two
// stores over one database, the second's clock two leases ahead of the
// first's (within their SkewMargin), so that a key's order must come from
// the database, not from the processes' clocks. (The relays take the
// ahead process's messages once their own clock reaches the commit: up
// to two leases late.)

// googleLease is the relays' lease on the emulators: a relay publishes a
// batch only when its Take answered within an eighth of the lease, and
// the emulators, serving several runs at once, often take more than the
// 50ms of pipeLease's eighth.
const googleLease = time.Second

// googleSkew is how far the second completing process's clock runs ahead:
// more than the time between the commits of one ordering key that follow
// each other in most runs, so that ordering a key by the processes'
// clocks (plant 294) reverses some.
const googleSkew = 2 * googleLease

// googleProject is any project: the emulators accept them all.
const googleProject = "idemgate-sim"

// errRollback makes a transaction roll back on purpose.
var errRollback = errors.New("sim: roll back")

// completer picks which of two completing processes completes key: the
// same one on every attempt of the key.
func completer(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % 2)
}

// skewedClocks returns the two processes' clocks, the second skew ahead.
func skewedClocks(skew time.Duration) [2]func() time.Time {
	return [2]func() time.Time{time.Now, func() time.Time { return time.Now().Add(skew) }}
}

// TestSimPipelineDatastore runs the pipeline family on Datastore's outbox
// (the emulator), completed by two processes with skewed clocks.
func TestSimPipelineDatastore(t *testing.T) {
	client := datastoreClient(t)
	if failed, _ := runPipe(t, pipeGoogleSeeds, func(t *testing.T) *sim.PipeBackend {
		return datastoreBackend(t, client, googleSkew)
	}); failed != nil {
		t.Fatal(failed.Report())
	}
}

// TestSimPipelineFirestore runs the pipeline family on Firestore's outbox
// (the emulator), completed by two processes with skewed clocks.
func TestSimPipelineFirestore(t *testing.T) {
	client := firestoreClient(t)
	if failed, _ := runPipe(t, pipeGoogleSeeds, func(t *testing.T) *sim.PipeBackend {
		return firestoreBackend(t, client, googleSkew)
	}); failed != nil {
		t.Fatal(failed.Report())
	}
}

// datastoreClient returns a client of the Datastore emulator.
func datastoreClient(t *testing.T) *datastore.Client {
	testenv.DatastoreEmulatorHost(t) // skips, or fails, when there is none
	if err := testenv.UseDatastoreEmulator(); err != nil {
		t.Fatal(err)
	}
	c, err := datastore.NewClient(testenv.Context(t), googleProject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// firestoreClient returns a client of the Firestore emulator.
func firestoreClient(t *testing.T) *firestore.Client {
	testenv.FirestoreEmulatorHost(t) // skips, or fails, when there is none
	if err := testenv.UseFirestoreEmulator(); err != nil {
		t.Fatal(err)
	}
	c, err := firestore.NewClient(testenv.Context(t), googleProject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// datastoreBackend is two Datastore stores in a fresh namespace, the
// second's clock skew ahead, the relays on the first's outbox.
func datastoreBackend(t *testing.T, client *datastore.Client, skew time.Duration) *sim.PipeBackend {
	ns := "sim-" + strings.ToLower(rand.Text()[:12])
	var sts [2]*datastorestore.Store
	for i, now := range skewedClocks(skew) {
		st, err := datastorestore.New(client, &datastorestore.Options{Namespace: ns, TTL: time.Hour, SkewMargin: 2 * googleSkew, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		sts[i] = st
	}
	complete := func(ctx context.Context, c store.Claim, msgs []outbox.Message, commit bool) error {
		st := sts[completer(c.Key)]
		_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
			if err := st.CompleteTx(tx, c, msgs...); err != nil {
				return err
			}
			if !commit {
				return errRollback
			}
			return nil
		})
		if errors.Is(err, errRollback) {
			return nil
		}
		return err
	}
	return &sim.PipeBackend{Name: "Datastore", Test: "TestSimPipelineDatastore", Store: sts[0], Complete: complete,
		Source: sts[0].Outbox(), Lease: googleLease, DelayBound: 12, Replaces: true}
}

// firestoreBackend is two Firestore stores on a fresh collection, the
// second's clock skew ahead, the relays on the first's outbox.
func firestoreBackend(t *testing.T, client *firestore.Client, skew time.Duration) *sim.PipeBackend {
	coll := "sim_" + strings.ToLower(rand.Text()[:12])
	var sts [2]*firestorestore.Store
	for i, now := range skewedClocks(skew) {
		st, err := firestorestore.New(client, &firestorestore.Options{Collection: coll, TTL: time.Hour, SkewMargin: 2 * googleSkew, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		sts[i] = st
	}
	complete := func(ctx context.Context, c store.Claim, msgs []outbox.Message, commit bool) error {
		st := sts[completer(c.Key)]
		err := client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
			if err := st.CompleteTx(tx, c, msgs...); err != nil {
				return err
			}
			if !commit {
				return errRollback
			}
			return nil
		})
		if errors.Is(err, errRollback) {
			return nil
		}
		return err
	}
	return &sim.PipeBackend{Name: "Firestore", Test: "TestSimPipelineFirestore", Store: sts[0], Complete: complete,
		Source: sts[0].Outbox(), Lease: googleLease, DelayBound: 12, Replaces: true}
}
