// Command example-function is the Cloud Functions (gen2) twin of
// example-run: a functions-framework-go program serving one CloudEvent
// function, OnOrder, that sends each Pub/Sub message to a supplier at most
// once, keyed "msg:<messageId>" (the key example-run's POST / uses, so the
// two can share a store).
//
// Environment:
//
//	FUNCTION_TARGET  the function served at "/" (default OnOrder; the
//	                 platform sets it from --entry-point)
//	PORT             listen port (default 8080)
//	IDEMGATE_STORE   store URL (default memory://): redis://host:6379/0,
//	                 postgres://…, mysql://user:pass@tcp(host:3306)/db,
//	                 sqlite:///path/file.db, datastore://project, firestore://project
//	SUPPLIER_URL     where each order is POSTed, with an Idempotency-Key header;
//	                 when empty, each execution is logged instead
//	IDEMGATE_LEASE   the claim lease (e.g. 30s; default: the gateway's)
//	LOG_LEVEL        debug, info (default), warn or error
//
// It accepts what functions-framework accepts at "/": Eventarc's binary
// CloudEvents, structured CloudEvents, and plain Pub/Sub push bodies, whose
// topic the framework reads from a request path containing
// projects/PROJECT/topics/TOPIC. See docs/cloudfunctions.md.
//
// A deployed function does not use this main: the platform's buildpack
// generates one around the function package, which registers its function
// in init (see the docs). This command registers in main instead, because
// it opens the store first and fails fast on bad configuration.
package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/idemgate/idemgate/internal/example"
	"github.com/idemgate/idemgate/store/memstore"
	"github.com/idemgate/idemgate/storeurl"
)

// target is the name OnOrder is registered under.
const target = "OnOrder"

func main() {
	// The framework reads FUNCTION_TARGET itself; without it, it would serve
	// the function at /OnOrder instead of "/".
	if os.Getenv("FUNCTION_TARGET") == "" {
		os.Setenv("FUNCTION_TARGET", target)
	}
	os.Exit(runMain(context.Background(), os.Getenv, os.Stdout))
}

// runMain is main without the exit: it serves, and returns the exit status
// once serving failed, having logged the failure as a JSON line like every
// other.
func runMain(ctx context.Context, getenv func(string) string, logOut io.Writer) int {
	if err := run(ctx, getenv, logOut); err != nil {
		example.LogFailure(logOut, "example-function failed", err)
		return 1
	}
	return 0
}

// run configures OnOrder, registers it and serves until the process ends:
// funcframework.Start neither returns on success nor shuts down gracefully.
// A claim interrupted by the end of the process frees when its lease ends.
func run(ctx context.Context, getenv func(string) string, logOut io.Writer) error {
	cfg, err := example.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	log := example.NewLogger(logOut, cfg.LogLevel)
	st, err := storeurl.Open(ctx, cfg.StoreURL)
	if err != nil {
		return err
	}
	defer st.Close()
	_, isMemory := st.Store.(*memstore.Store)
	example.WarnSingleInstance(log, isMemory)
	onOrder, err := newOnOrder(st.Store, cfg, log)
	if err != nil {
		return err
	}
	functions.CloudEvent(target, onOrder)
	log.Info("example-function starting", slog.String("port", cfg.Port), slog.String("store", st.Name),
		slog.String("function_target", getenv("FUNCTION_TARGET")))
	return funcframework.Start(cfg.Port)
}
