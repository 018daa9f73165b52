package datastorestore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
)

func TestMain(m *testing.M) {
	// The examples build their client with datastore.NewClient, which
	// honours DATASTORE_EMULATOR_HOST.
	if err := testenv.UseDatastoreEmulator(); err != nil {
		fmt.Fprintln(os.Stderr, "datastorestore tests:", err)
	}
	testenv.Main(m)
}

// project is any project ID: the emulator accepts them all.
const project = "idemgate-test"

// newClient returns a client of the test emulator; opts come after the
// emulator's own options (e.g. a gRPC interceptor).
func newClient(t testing.TB, opts ...option.ClientOption) *datastore.Client {
	t.Helper()
	return projectClient(t, project, opts...)
}

// projectClient is newClient for a project of its own: the emulator keeps
// each project's data apart, as Datastore keeps databases.
func projectClient(t testing.TB, project string, opts ...option.ClientOption) *datastore.Client {
	t.Helper()
	host := testenv.DatastoreEmulatorHost(t)
	all := append([]option.ClientOption{
		option.WithEndpoint("passthrough:///" + host),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}, opts...)
	c, err := datastore.NewClient(testenv.Context(t), project, all...)
	if err != nil {
		t.Fatalf("datastore.NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// namespace returns a namespace no other test uses.
func namespace() string {
	return "t-" + strings.ToLower(rand.Text())
}

// newStore returns a store on client in a fresh namespace; o may set
// anything but the namespace.
func newStore(t testing.TB, client *datastore.Client, o datastorestore.Options) *datastorestore.Store {
	t.Helper()
	o.Namespace = namespace()
	st, err := datastorestore.New(client, &o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return st
}

// storesOn returns a maker of stores on client, each in a fresh namespace.
func storesOn(client *datastore.Client) googletest.NewStore {
	return func(t testing.TB, o googletest.Options) googletest.Store {
		return newStore(t, client, datastorestore.Options{TTL: o.TTL, SkewMargin: o.SkewMargin, Now: o.Now})
	}
}

// deleteRecord is storetest.Config.Delete: the record's entity goes, as a
// TTL policy deletes it.
func deleteRecord(t testing.TB, st store.Store, key string) {
	if err := datastorestore.DeleteRecord(context.Background(), st.(*datastorestore.Store), key); err != nil {
		t.Fatalf("deleting the record: %v", err)
	}
}

// inTx runs the suite's transactions on client, which must be the client
// of the stores it is given.
func inTx(client *datastore.Client) googletest.InTx {
	return func(ctx context.Context, st store.Store, fn func(complete func(store.Claim) error) error) error {
		_, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
			return fn(func(c store.Claim) error { return st.(*datastorestore.Store).CompleteTx(tx, c) })
		})
		return err
	}
}
