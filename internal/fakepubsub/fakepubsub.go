// Package fakepubsub starts the in-process Pub/Sub fake (pstest) for the
// tests and benchmarks, with a client and a topic. It is its own
// package so that test binaries that do not need Pub/Sub do not link the
// client (and the goroutines its dependencies start at init).
package fakepubsub

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/internal/testenv"
)

// Topic is the topic New creates.
const Topic = "projects/p/topics/out"

// New starts a pstest server with reactors, and returns it with a client
// of project "p" connected to it and Topic created; both close when tb
// ends.
func New(tb testing.TB, reactors ...pstest.ServerReactorOption) (*pstest.Server, *pubsub.Client) {
	tb.Helper()
	srv, c := NewProject(tb, "p", reactors...)
	if _, err := c.TopicAdminClient.CreateTopic(tb.Context(), &pubsubpb.Topic{Name: Topic}); err != nil {
		tb.Fatal(err)
	}
	return srv, c
}

// NewProject is New with a client of project, and no topic created.
func NewProject(tb testing.TB, project string, reactors ...pstest.ServerReactorOption) (*pstest.Server, *pubsub.Client) {
	tb.Helper()
	return NewIntercepted(tb, project, nil, reactors...)
}

// NewIntercepted is NewProject with a client whose unary calls go through
// intercept, when not nil (see Slow).
func NewIntercepted(tb testing.TB, project string, intercept grpc.UnaryClientInterceptor, reactors ...pstest.ServerReactorOption) (*pstest.Server, *pubsub.Client) {
	tb.Helper()
	srv := pstest.NewServer(reactors...)
	tb.Cleanup(func() { srv.Close() })
	opts := testenv.PubSubClientOptions(srv.Addr)
	if intercept != nil {
		opts = append(opts, option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(intercept)))
	}
	c, err := pubsub.NewClient(tb.Context(), project, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return srv, c
}

// Slow delays each Publish call by delay before it reaches the server, or
// until its context ends: the latency of a slow Pub/Sub. (A pstest
// reactor cannot add it: reactors run under the server's lock, one
// request at a time.)
func Slow(delay time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/Publish") {
			t := time.NewTimer(delay) // a latency, not a synchronisation
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		return invoke(ctx, method, req, reply, cc, opts...)
	}
}
