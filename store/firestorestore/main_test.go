package firestorestore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemgate/idemgate/internal/testenv"
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

// wire records the Firestore RPCs a client makes (by method name, e.g.
// "Commit") and lets a test tamper with unary ones.
type wire struct {
	mu    sync.Mutex // guards the fields below
	calls []string
	// fault, when set, runs each unary call instead of the interceptor:
	// invoke sends it to the server.
	fault func(ctx context.Context, method string, invoke func() error) error
}

// client returns a client of the test emulator whose RPCs go through w.
// t must not be parallel: FIRESTORE_EMULATOR_HOST is cleared for its
// duration, or firestore.NewClient would dial a connection of its own and
// leave it open beside ours.
func (w *wire) client(t testing.TB) *firestore.Client {
	t.Helper()
	host := testenv.FirestoreEmulatorHost(t)
	t.Setenv("FIRESTORE_EMULATOR_HOST", "")
	conn, err := grpc.NewClient("passthrough:///"+host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(w.unary),
		grpc.WithStreamInterceptor(w.stream))
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

func (w *wire) record(method string) func(context.Context, string, func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, path.Base(method))
	return w.fault
}

func (w *wire) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	fault := w.record(method)
	invoke := func() error { return invoker(ctx, method, req, reply, cc, opts...) }
	if fault != nil {
		return fault(ctx, path.Base(method), invoke)
	}
	return invoke()
}

func (w *wire) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	w.record(method)
	return streamer(ctx, desc, cc, method, opts...)
}

// take returns the calls made since the last take.
func (w *wire) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.calls
	w.calls = nil
	return c
}

func (w *wire) setFault(f func(ctx context.Context, method string, invoke func() error) error) {
	w.mu.Lock()
	w.fault = f
	w.mu.Unlock()
}

// once returns a fault that applies f to the first call of method only.
func once(method string, f func(invoke func() error) error) func(context.Context, string, func() error) error {
	var done sync.Once
	return func(_ context.Context, m string, invoke func() error) error {
		hit := false
		if m == method {
			done.Do(func() { hit = true })
		}
		if hit {
			return f(invoke)
		}
		return invoke()
	}
}
