// Command example-run is a Cloud Run service that consumes Pub/Sub push
// deliveries with idemgate, the main runnable example of this module.
//
// Environment:
//
//	PORT             listen port (default 8080)
//	IDEMGATE_STORE   store URL (default memory://): redis://host:6379/0,
//	                 postgres://…, mysql://user:pass@tcp(host:3306)/db,
//	                 sqlite:///path/file.db, datastore://project, firestore://project
//	SUPPLIER_URL     where each order is POSTed, with an Idempotency-Key header;
//	                 when empty, each execution is logged instead
//	IDEMGATE_LEASE   the claim lease (e.g. 30s; default: the gateway's)
//	LOG_LEVEL        debug, info (default), warn or error
//	PUSH_AUDIENCE    with PUSH_SERVICE_ACCOUNT: verify the OIDC token Pub/Sub
//	                 sends with each push (audience and signing service account;
//	                 see docs/security.md); unset: no verification in-app
//	IDEMGATE_METRICS stdout: write OpenTelemetry metrics as JSON to stderr
//	                 every minute (and at exit); empty: none
//	IDEMGATE_PIPELINE_TABLE
//	                 the records table of POST /pipeline/orders (default
//	                 example_pipeline), with its outbox <table>_outbox and
//	                 its orders <table>_orders beside it, created at start-up
//	PIPELINE_TOPIC   the topic POST /pipeline/orders ships to (default shipments)
//	PIPELINE_PUBLISH outbox (default) or direct: publish the shipment from the
//	                 body, before the transaction, with GOOGLE_CLOUD_PROJECT;
//	                 the anti-pattern the e2e proof compares with
//	IDEMGATE_MAX_ATTEMPTS
//	                 each key's attempt budget on every route: the failure
//	                 that spends it makes the key FAILED, and its deliveries
//	                 are answered 422 unrun, so Pub/Sub dead-letters them
//	                 (idemgate failed lists them, idemgate retry replays
//	                 them); empty or 0 (default): no budget
//	IDEMGATE_TERMINAL
//	                 supplier-4xx: a 4xx answer of the supplier (but 408 and
//	                 429) makes the key FAILED at once: the order is refused
//	                 and no retry can mend it; empty (default): retried
//	IDEMGATE_WAIT_FOR_HOLDER
//	                 how long a copy of a delivery that meets its key held
//	                 by another waits for that holder to settle (e.g. 5s),
//	                 and is then acknowledged if the work is done, instead
//	                 of answering 503 at once; empty or 0 (default): no wait
//	IDEMGATE_ORDERS_FINGERPRINT
//	                 reject or accept: fingerprint the payloads of /orders, so
//	                 that an order_id reused for a different order is a
//	                 conflict, refused with 409 (reject: it reaches the
//	                 dead-letter topic) or acknowledged as a duplicate and
//	                 logged (accept); empty (default): no fingerprint, and a
//	                 reused order_id is a duplicate
//
// Routes:
//
//	POST /            de-duplicates on the messageId (transport redelivery)
//	POST /orders      de-duplicates on the order_id attribute (also catches
//	                  a producer that publishes one order twice)
//	POST /po-updates  de-duplicates on the messageId and serializes the
//	                  updates of one po_id attribute with a Mutex
//	POST /ledger      de-duplicates on the messageId; with a SQL store, writes
//	                  one row (message_id, the amount attribute, data) to the
//	                  table example_ledger, created at start-up if absent, and
//	                  records the message done in the same transaction
//	                  (sqlstore's CompleteTx), so a delivery that lost its
//	                  claim writes nothing; with any other store it answers
//	                  501 (Pub/Sub retries, then dead-letters)
//	POST /pipeline/orders
//	                  stage A of a pipeline, on a SQL store: de-duplicates on
//	                  the order_id attribute and, in one transaction, records
//	                  the order done, writes its row and enqueues its shipment
//	                  (one message to PIPELINE_TOPIC, child key named
//	                  "shipment") in the outbox, so they commit together or not
//	                  at all; an order whose amount attribute is not a positive
//	                  integer is rolled back and acknowledged as rejected. A
//	                  relay publishes the outbox (cmd/idemgate relay). With
//	                  any other store it answers 501
//	POST /pipeline/shipments
//	                  stage B: de-duplicates on the child key attribute
//	                  (gateway.KeyFromChildKey), so a shipment the relay
//	                  publishes twice runs once, and sends it to the supplier
//	GET  /healthz     200 when serving
//
// Logs are JSON lines on stdout with Cloud Logging's "severity" field, a
// start-up failure included; on memory:// the first is a WARN that the
// service must run as one instance. SIGTERM (Cloud Run's shutdown signal)
// drains in-flight deliveries before exiting. docs/operations.md describes
// the routes, their key prefixes and the variables for an operator.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/example"
	"github.com/idemgate/idemgate/store/memstore"
	"github.com/idemgate/idemgate/storeurl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	code := runMain(ctx, os.Getenv, os.Stdout)
	stop()
	os.Exit(code)
}

// runMain is main without the exit: it runs the service and returns the
// exit status, having logged a failure as a JSON line like every other.
func runMain(ctx context.Context, getenv func(string) string, logOut io.Writer) int {
	if err := run(ctx, getenv, logOut, nil); err != nil {
		example.LogFailure(logOut, "example-run failed", err)
		return 1
	}
	return 0
}

// run serves until ctx is done. If ready is not nil it receives the
// listener's address once serving.
func run(ctx context.Context, getenv func(string) string, logOut io.Writer, ready chan<- string) error {
	cfg, err := example.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	fc, err := failureConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	log := example.NewLogger(logOut, cfg.LogLevel)
	// go-redis logs its connection pool's troubles by itself, in plain text
	// on stderr: through the service's logger they stay JSON lines.
	redis.SetLogger(storeurl.RedisLogger{Logger: log, Level: slog.LevelWarn})
	stopMetrics, err := example.StartMetrics(cfg.Metrics, os.Stderr, time.Minute)
	if err != nil {
		return err
	}
	defer stopMetrics(context.Background())
	st, err := storeurl.Open(ctx, cfg.StoreURL)
	if err != nil {
		return err
	}
	defer st.Close()
	_, isMemory := st.Store.(*memstore.Store)
	example.WarnSingleInstance(log, isMemory)
	// One Gateway for every route on the store, as the README teaches.
	g, err := newGateway(st.Store, cfg, fc, log)
	if err != nil {
		return err
	}
	h, err := newServer(ctx, g, st.Store, cfg, log, getenv("IDEMGATE_EXAMPLE_BARE") == "1")
	if err != nil {
		return err
	}
	if h, err = withPipeline(ctx, h, g, st.Store, cfg, getenv, log); err != nil {
		return err
	}
	if h, err = withPushAuth(h, getenv("PUSH_AUDIENCE"), getenv("PUSH_SERVICE_ACCOUNT"), log); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", ":"+cfg.Port)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("example-run serving", slog.String("addr", ln.Addr().String()), slog.String("store", st.Name))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Cloud Run gives 10 s after SIGTERM: finish what is in flight.
	sctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc
	log.Info("example-run stopped")
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: deliveries still in flight: %w", err)
	}
	return err
}
