package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Exit statuses.
const (
	exitOK    = 0 // every message acked, and the -expect-once check passed
	exitFail  = 1 // a message not of a poison order dead-lettered or lost, a check failed, or the run could not start
	exitUsage = 2 // bad flags
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: it parses args, starts what the flags ask for,
// runs the storm, prints the report on stdout and returns the exit status.
// Progress notes and errors go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return exitUsage
	}

	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}

	// Step 1: the supplier, when asked for (the self-test always has one).
	var sup *supplier
	var supplierURL string
	if cfg.SupplierAddr != "" || cfg.SelfTest {
		sup = newSupplier(cfg.SupplierFailFirst, cfg.SupplierDelay)
		sup.poison = poisonOrders(cfg, seed)
		ls, err := listen(cmp.Or(cfg.SupplierAddr, "127.0.0.1:0"), sup)
		if err != nil {
			fmt.Fprintf(stderr, "pushstorm: start supplier: %v\n", err)
			return exitFail
		}
		defer ls.close()
		supplierURL = ls.URL + "/"
		fmt.Fprintf(stderr, "pushstorm: supplier listening on %s (give it to the endpoint as SUPPLIER_URL)\n", supplierURL)
	}
	if cfg.supplierOnly() {
		fmt.Fprintln(stderr, "pushstorm: serving the supplier only; interrupt to print its stats and exit")
		<-ctx.Done()
		return writeSupplierOnly(stdout, sup.snapshot(false), cfg.JSON)
	}

	// Step 2: the self-test endpoint, in place of -url.
	if cfg.SelfTest {
		client := &http.Client{Transport: newTransport(cfg.Concurrency)}
		defer client.CloseIdleConnections()
		ls, err := listen("127.0.0.1:0", newSelfTarget(supplierURL, client))
		if err != nil {
			fmt.Fprintf(stderr, "pushstorm: start self-test endpoint: %v\n", err)
			return exitFail
		}
		defer ls.close() // before the supplier: its handlers call the supplier
		cfg.URL = ls.URL + "/orders"
		fmt.Fprintf(stderr, "pushstorm: self-test endpoint at %s (dedupes on order_id)\n", cfg.URL)
	}

	// Step 2b: the spawned endpoint, in place of -url.
	if cfg.Spawn != "" {
		base, stop, err := spawn(ctx, cfg.Spawn, supplierURL, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "pushstorm: -spawn: %v\n", err)
			return exitFail
		}
		defer stop()
		cfg.URL = base + cfg.Path
		fmt.Fprintf(stderr, "pushstorm: spawned %q at %s\n", cfg.Spawn, base)
	}

	// Step 3: the storm.
	res, err := storm(ctx, cfg, seed)
	if err != nil {
		fmt.Fprintf(stderr, "pushstorm: %v\n", err)
		return exitFail
	}
	if cfg.DeadLetters != "" {
		if err := writeDeadLetters(cfg.DeadLetters, res); err != nil {
			fmt.Fprintf(stderr, "pushstorm: %v\n", err)
			return exitFail
		}
	}

	// Step 4: the report and the verdict.
	var stats *supplierStats
	if sup != nil {
		s := sup.snapshot(true) // newReport counts per class, and drops the keys
		stats = &s
	}
	rep := newReport(cfg, seed, res, stats)
	if cfg.JSON {
		err = rep.writeJSON(stdout)
		for _, p := range rep.Problems {
			fmt.Fprintln(stderr, "pushstorm: FAIL: "+p)
		}
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pushstorm: write report: %v\n", err)
		return exitFail
	}
	if !rep.OK {
		return exitFail
	}
	return exitOK
}

// writeSupplierOnly prints the stats of a supplier-only run.
func writeSupplierOnly(w io.Writer, s supplierStats, asJSON bool) int {
	var err error
	if asJSON {
		err = writeIndentedJSON(w, s)
	} else {
		_, err = fmt.Fprintf(w, "supplier: %d requests (%d accepted, %d refused, %d without key), %d distinct keys, %d accepted more than once, max %d in flight per key\n",
			s.Hits, s.Accepted, s.Refused, s.MissingKey, s.DistinctKeys, s.KeysAcceptedMoreThanOnce, s.MaxInFlightPerKey)
	}
	if err != nil {
		return exitFail
	}
	return exitOK
}
