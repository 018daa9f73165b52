package firestorestore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
)

func TestMain(m *testing.M) {
	// Clients, the examples' included, find the emulator through
	// FIRESTORE_EMULATOR_HOST, as firestore.NewClient documents.
	if err := testenv.UseFirestoreEmulator(); err != nil {
		fmt.Fprintln(os.Stderr, "firestorestore tests:", err)
	}
	testenv.Main(m)
}

// project is any project ID: the emulator accepts them all.
const project = "idemgate-test"

// newClient returns a client of the test emulator.
func newClient(t testing.TB) *firestore.Client {
	t.Helper()
	testenv.FirestoreEmulatorHost(t) // skips when there is none
	c, err := firestore.NewClient(testenv.Context(t), project)
	if err != nil {
		t.Fatalf("firestore.NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// collection returns a collection no other test uses.
func collection() string {
	return "t-" + strings.ToLower(rand.Text())
}

// newStore returns a store on client in a fresh collection; o may set
// anything but the collection.
func newStore(t testing.TB, client *firestore.Client, o firestorestore.Options) *firestorestore.Store {
	t.Helper()
	o.Collection = collection()
	st, err := firestorestore.New(client, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return st
}

// storesOn returns a maker of stores on client, each in a fresh collection.
func storesOn(client *firestore.Client) googletest.NewStore {
	return func(t testing.TB, o googletest.Options) googletest.Store {
		return newStore(t, client, firestorestore.Options{TTL: o.TTL, SkewMargin: o.SkewMargin, Now: o.Now})
	}
}

// deleteRecord is storetest.Config.Delete: the record's document goes, as a
// TTL policy deletes it.
func deleteRecord(t testing.TB, st store.Store, key string) {
	if err := firestorestore.DeleteRecord(context.Background(), st.(*firestorestore.Store), key); err != nil {
		t.Fatalf("deleting the record: %v", err)
	}
}

// inTx runs the suite's transactions on client, which must be the client
// of the stores it is given.
func inTx(client *firestore.Client) googletest.InTx {
	return func(ctx context.Context, st store.Store, fn func(complete func(store.Claim) error) error) error {
		return client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
			return fn(func(c store.Claim) error { return st.(*firestorestore.Store).CompleteTx(tx, c) })
		})
	}
}

// wired returns a fresh store whose client's RPCs go through a new Wire.
func wired(t testing.TB) (googletest.Store, *googletest.Wire) {
	w := &googletest.Wire{}
	return newStore(t, wireClient(t, w), firestorestore.Options{Now: func() time.Time { return googletest.WiredNow }}), w
}

// wireClient returns a client of the test emulator whose RPCs go through
// w. t must not be parallel: FIRESTORE_EMULATOR_HOST is cleared for its
// duration, or firestore.NewClient would dial a connection of its own and
// leave it open beside ours.
func wireClient(t testing.TB, w *googletest.Wire) *firestore.Client {
	t.Helper()
	host := testenv.FirestoreEmulatorHost(t)
	t.Setenv("FIRESTORE_EMULATOR_HOST", "")
	conn, err := grpc.NewClient("passthrough:///"+host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(w.Unary),
		grpc.WithStreamInterceptor(w.Stream))
	if err != nil {
		t.Fatal(err)
	}
	c, err := firestore.NewClient(testenv.Context(t), project, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatalf("firestore.NewClient: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		conn.Close()
	})
	return c
}
