package googletest

import (
	"context"
	"path"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A Fault runs a unary RPC in place of the Wire: invoke sends it to the
// server; method is the RPC's short name (e.g. "Commit").
type Fault func(ctx context.Context, method string, invoke func() error) error

// Wire records the RPCs a client makes, by short method name, and lets a
// test tamper with the unary ones. Install Unary (and Stream, for clients
// that stream) as the client's gRPC interceptors. It is safe for
// concurrent use.
type Wire struct {
	mu    sync.Mutex // guards the fields below
	calls []string
	fault Fault
}

func (w *Wire) record(method string) Fault {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, path.Base(method))
	return w.fault
}

// Unary is a grpc.UnaryClientInterceptor that records each call and runs
// it through the fault, if one is set.
func (w *Wire) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	fault := w.record(method)
	invoke := func() error { return invoker(ctx, method, req, reply, cc, opts...) }
	if fault != nil {
		return fault(ctx, path.Base(method), invoke)
	}
	return invoke()
}

// Stream is a grpc.StreamClientInterceptor that records each call.
func (w *Wire) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	w.record(method)
	return streamer(ctx, desc, cc, method, opts...)
}

// Take returns the calls made since the last Take.
func (w *Wire) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.calls
	w.calls = nil
	return c
}

// Count takes the calls made since the last Take and returns how many
// were of method.
func (w *Wire) Count(method string) int {
	n := 0
	for _, m := range w.Take() {
		if m == method {
			n++
		}
	}
	return n
}

// SetFault makes f run every later unary call; nil sends them straight
// to the server again.
func (w *Wire) SetFault(f Fault) {
	w.mu.Lock()
	w.fault = f
	w.mu.Unlock()
}

// Once returns a Fault that applies f to the first call of method only.
func Once(method string, f func(invoke func() error) error) Fault {
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

// Always returns a Fault that answers every call of method with err,
// without sending it.
func Always(method string, err error) Fault {
	return func(_ context.Context, m string, invoke func() error) error {
		if m == method {
			return err
		}
		return invoke()
	}
}

// LostReply lets a call reach the server and then reports Unavailable, as
// when the connection drops before the reply arrives.
func LostReply(invoke func() error) error { return LostReplyAs(codes.Unavailable)(invoke) }

// LostReplyAs is LostReply reporting code.
func LostReplyAs(code codes.Code) func(invoke func() error) error {
	return func(invoke func() error) error {
		if err := invoke(); err != nil {
			return err
		}
		return status.Error(code, "injected: the reply was lost")
	}
}
