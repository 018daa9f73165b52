package datastorestore_test

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
)

// wire records the Datastore RPCs a client makes (by method name, e.g.
// "Lookup") and lets a test tamper with them.
type wire struct {
	mu    sync.Mutex // guards the fields below
	calls []string
	// fault, when set, runs each call instead of the interceptor: invoke
	// sends it to the server.
	fault func(ctx context.Context, method string, invoke func() error) error
}

func (w *wire) option() option.ClientOption {
	return option.WithGRPCDialOption(grpc.WithUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			name := path.Base(method)
			w.mu.Lock()
			w.calls = append(w.calls, name)
			fault := w.fault
			w.mu.Unlock()
			invoke := func() error { return invoker(ctx, method, req, reply, cc, opts...) }
			if fault != nil {
				return fault(ctx, name, invoke)
			}
			return invoke()
		}))
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

// TestRPCsPerMessage pins the round trips: a fresh message (Claim then
// Complete) costs four, a duplicate two, and a read-only outcome never
// commits.
func TestRPCsPerMessage(t *testing.T) {
	w := &wire{}
	st := newStore(t, newClient(t, w.option()), datastorestore.Options{})
	ctx := t.Context()
	step := func(name string, want []string, f func()) {
		t.Helper()
		w.take()
		f()
		got := w.take()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: RPCs (-want +got):\n%s", name, diff)
		}
		t.Logf("%-28s %d RPCs %v", name, len(got), got)
	}
	claim := func(key string, want store.Status) store.Claim {
		t.Helper()
		c, err := st.Claim(ctx, key, time.Minute)
		if err != nil || c.Status != want {
			t.Fatalf("Claim(%q) = %v, %v; want %v", key, c.Status, err, want)
		}
		return c
	}
	var c store.Claim
	step("fresh message", []string{"Lookup", "Commit", "Lookup", "Commit"}, func() {
		c = claim("m1", store.Won)
		if ok, err := st.Complete(ctx, c); !ok || err != nil {
			t.Fatalf("Complete = %v, %v", ok, err)
		}
	})
	step("duplicate of a done message", []string{"Lookup", "Rollback"}, func() { claim("m1", store.AlreadyDone) })
	step("retried Complete", []string{"Lookup", "Rollback"}, func() { st.Complete(ctx, c) })
	c = claim("m2", store.Won)
	step("duplicate while held", []string{"Lookup", "Rollback"}, func() { claim("m2", store.HeldByOther) })
	step("Release", []string{"Lookup", "Commit"}, func() { st.Release(ctx, c) })
	step("Claim after Release", []string{"Lookup", "Commit"}, func() { claim("m2", store.Won) })
}

// TestLostCommitReplyReaffirms: the first commit of a Claim lands, but
// its reply is lost (the client sees Unavailable). The store retries with
// the same token and must re-affirm the win: Won at fence 1, not
// HeldByOther, not fence 2.
func TestLostCommitReplyReaffirms(t *testing.T) {
	w := &wire{}
	st := newStore(t, newClient(t, w.option()), datastorestore.Options{})
	ctx := t.Context()
	w.setFault(once("Commit", func(invoke func() error) error {
		if err := invoke(); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "injected: the reply was lost")
	}))
	c, err := st.Claim(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Claim after a lost commit reply: %v", err)
	}
	if c.Status != store.Won || c.Fence != 1 {
		t.Fatalf("Claim after a lost commit reply = %v at fence %d, want Won at fence 1 (re-affirmed)", c.Status, c.Fence)
	}
	// The client rolls back after any failed commit; then the retry looks
	// the entity up outside a transaction, finds its own token and writes
	// nothing.
	if got, want := w.take(), []string{"Lookup", "Commit", "Rollback", "Lookup"}; !cmp.Equal(got, want) {
		t.Errorf("RPCs = %v, want %v (the retry must find its own token and write nothing)", got, want)
	}
	if h, err := st.Claim(ctx, "k", time.Minute); err != nil || h.Status != store.HeldByOther {
		t.Fatalf("another Claim = %v, %v; want HeldByOther", h.Status, err)
	}
	if ok, err := st.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete of the re-affirmed claim = %v, %v; want true", ok, err)
	}
}

// TestResentCommitReaffirms: the transport sends the first commit twice
// (as gRPC's retry policy does after a connection drops): the second copy
// meets a transaction that is already over, whatever the server then
// answers, the Claim must end Won at fence 1.
func TestResentCommitReaffirms(t *testing.T) {
	w := &wire{}
	st := newStore(t, newClient(t, w.option()), datastorestore.Options{})
	var second error
	w.setFault(once("Commit", func(invoke func() error) error {
		if err := invoke(); err != nil {
			return err
		}
		second = invoke()
		return second
	}))
	c, err := st.Claim(t.Context(), "k", time.Minute)
	t.Logf("the server answered the resent commit with: %v", second)
	if err != nil || c.Status != store.Won || c.Fence != 1 {
		t.Fatalf("Claim with a resent commit = %v at fence %d, %v; want Won at fence 1", c.Status, c.Fence, err)
	}
}

// TestLostCompleteReply: Complete's commit lands, its reply is lost; the
// retry sees DONE with the caller's fence and reports true.
func TestLostCompleteReply(t *testing.T) {
	w := &wire{}
	st := newStore(t, newClient(t, w.option()), datastorestore.Options{})
	ctx := t.Context()
	c, err := st.Claim(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w.setFault(once("Commit", func(invoke func() error) error {
		if err := invoke(); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "injected: the reply was lost")
	}))
	if ok, err := st.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete after a lost reply = %v, %v; want true", ok, err)
	}
	if d, err := st.Claim(ctx, "k", time.Minute); err != nil || d.Status != store.AlreadyDone {
		t.Fatalf("Claim = %v, %v; want AlreadyDone", d.Status, err)
	}
}

// TestContentionGivesUp: a key whose every commit loses its race is
// reported after a bounded number of attempts, as an error that wraps
// datastore.ErrConcurrentTransaction.
func TestContentionGivesUp(t *testing.T) {
	w := &wire{}
	st := newStore(t, newClient(t, w.option()), datastorestore.Options{})
	w.setFault(func(_ context.Context, method string, invoke func() error) error {
		if method == "Commit" {
			return status.Error(codes.Aborted, "injected: too much contention")
		}
		return invoke()
	})
	_, err := st.Claim(t.Context(), "k", time.Minute)
	if !errors.Is(err, datastore.ErrConcurrentTransaction) || !strings.HasPrefix(err.Error(), "datastorestore: Claim") {
		t.Fatalf("Claim under endless contention = %v, want a datastorestore error wrapping ErrConcurrentTransaction", err)
	}
	commits := 0
	for _, m := range w.take() {
		if m == "Commit" {
			commits++
		}
	}
	if commits != 5 {
		t.Errorf("%d commits attempted, want 5", commits)
	}
	t.Log(err)
}

// TestCancelledMidCall: a context cancelled while an RPC is in flight
// gives an error that wraps context.Canceled (gRPC reports it as a
// status, which does not).
func TestCancelledMidCall(t *testing.T) {
	w := &wire{}
	st := newStore(t, newClient(t, w.option()), datastorestore.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w.setFault(func(ctx context.Context, method string, invoke func() error) error {
		cancel()
		return invoke()
	})
	_, err := st.Claim(ctx, "k", time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim cancelled mid-call = %v, want an error wrapping context.Canceled", err)
	}
}
