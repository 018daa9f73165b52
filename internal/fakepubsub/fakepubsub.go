// Package fakepubsub starts the in-process Pub/Sub fake (pstest) for the
// tests and benchmarks, with a client and a topic. It is its own
// package so that test binaries that do not need Pub/Sub do not link the
// client (and the goroutines its dependencies start at init).
package fakepubsub

import (
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

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
	srv := pstest.NewServer(reactors...)
	tb.Cleanup(func() { srv.Close() })
	c, err := pubsub.NewClient(tb.Context(), project, testenv.PubSubClientOptions(srv.Addr)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return srv, c
}
