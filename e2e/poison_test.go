package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
)

// The storm of TestPoisonStorm, the same in both runs: 5% of the orders
// are poison (the supplier refuses them with 422), 10% go out as two
// concurrent copies, each of which must be acknowledged on its own (as
// when the first delivery's ack deadline passed), the rest are normal.
// The supplier takes 50 ms per order, so that a copy meets its key held.
const (
	poisonOrders   = 400
	poisonShare    = "0.05"
	poisonSeed     = "7"
	stormAttempts  = 5 // pushstorm dead-letters after this many nacked attempts
	gatewayBudget  = 3 // IDEMGATE_MAX_ATTEMPTS with the options on
	maxCopies503On = 2 // 503s of copies tolerated with the options on
)

// stormArgs are pushstorm's flags for the storm against example-run's
// /orders, with a fresh supplier.
var stormArgs = []string{
	"-path", "/orders", "-supplier", "127.0.0.1:0", "-json", "-expect-once",
	"-n", strconv.Itoa(poisonOrders), "-concurrency", "16", "-seed", poisonSeed,
	"-poison", poisonShare, "-concurrent", "0.1", "-ack-each-copy", "-dup", "0", "-republish", "0",
	"-supplier-delay", "50ms", "-backoff-min", "200ms", "-backoff-max", "1s",
	"-max-attempts", strconv.Itoa(stormAttempts),
}

// optionsOn is example-run's environment with the options of issue 32:
// an attempt budget, the supplier's 4xx as a terminal failure, and a
// wait for the holder.
var optionsOn = []string{
	"IDEMGATE_MAX_ATTEMPTS=" + strconv.Itoa(gatewayBudget),
	"IDEMGATE_TERMINAL=supplier-4xx",
	"IDEMGATE_WAIT_FOR_HOLDER=5s",
}

// TestPoisonStorm is the proof of issue 32, on example-run and the
// Datastore emulator, driven by pushstorm. The same storm runs twice, on
// a namespace each: without the options, every delivery of a poison order
// runs its body again until Pub/Sub gives up, and a concurrent copy is
// answered 503 and redelivered after a backoff; with them, a poison order's
// body runs at most IDEMGATE_MAX_ATTEMPTS times (once: its 422 is terminal),
// its key is FAILED with the supplier's reason, and a copy waits for its
// holder and is acknowledged. Then the operator's tool lists the FAILED
// keys (idemgate failed) and, the supplier "fixed", retries them by reason
// (idemgate retry -reason); the dead letters are replayed: each poison
// order reaches the supplier exactly once.
func TestPoisonStorm(t *testing.T) {
	t.Parallel()
	host := testenv.DatastoreEmulatorHost(t)
	pushstorm, err := testenv.GoBuild("github.com/idemgate/idemgate/cmd/pushstorm")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	storm := func(name string, env []string, args ...string) (stormReport, string) {
		t.Helper()
		ns := unique(t) + "-" + name
		env = append(env, "IDEMGATE_STORE=datastore://idemgate-e2e?namespace="+ns, "DATASTORE_EMULATOR_HOST="+host)
		deadLetters := filepath.Join(dir, name+".jsonl")
		return runPushstorm(t, pushstorm, filepath.Join(dir, name+".log"), env,
			append(args, "-dead-letters", deadLetters)...), ns
	}

	off, _ := storm("off", nil, stormArgs...)
	on, nsOn := storm("on", optionsOn, stormArgs...)
	t.Logf("%-28s %12s %12s", "", "options off", "options on")
	for _, row := range compare(off, on) {
		t.Logf("%-28s %12s %12s", row[0], row[1], row[2])
	}

	// Off: each poison order's body ran once per attempt Pub/Sub made
	// (every delivery but a copy's 503), until it dead-lettered.
	p := off.Classes["poison"]
	if got, want := p.BodyRuns, p.Deliveries-p.Status["503"]; got != want {
		t.Errorf("options off: poison orders' body runs = %d, want one per delivery not answered 503 (%d)", got, want)
	}
	for _, o := range off.PoisonOrders {
		if o.BodyRuns < stormAttempts || !o.DeadLettered {
			t.Errorf("options off: poison order %s ran %d times, dead-lettered %v; want at least %d runs (one per attempt), then the dead-letter topic",
				o.OrderID, o.BodyRuns, o.DeadLettered, stormAttempts)
		}
	}
	// On: at most the budget, and dead-lettered all the same.
	for _, o := range on.PoisonOrders {
		if o.BodyRuns > gatewayBudget || !o.DeadLettered {
			t.Errorf("options on: poison order %s ran %d times, dead-lettered %v; want at most %d runs (IDEMGATE_MAX_ATTEMPTS), then the dead-letter topic",
				o.OrderID, o.BodyRuns, o.DeadLettered, gatewayBudget)
		}
	}
	for name, r := range map[string]stormReport{"off": off, "on": on} {
		if want := poisonCount(); len(r.PoisonOrders) != want || r.Classes["poison"].DeadLettered != want {
			t.Errorf("options %s: %d poison orders, %d dead-lettered; want %d of each", name, len(r.PoisonOrders), r.Classes["poison"].DeadLettered, want)
		}
	}
	// The copies: no 503 with a wait for the holder, and acknowledged
	// sooner than through a 503 and a redelivery.
	if got := on.Classes["concurrent_copy"].Status["503"]; got > maxCopies503On {
		t.Errorf("options on: copies answered 503 %d times; want at most %d (they wait for the holder)", got, maxCopies503On)
	}
	if off.Classes["concurrent_copy"].Status["503"] == 0 {
		t.Errorf("options off: no copy was answered 503; the storm made no copy meet its holder")
	}
	if on.CopyTimeToAck.P99Millis >= off.CopyTimeToAck.P99Millis {
		t.Errorf("copies' p99 time-to-ack: %.1f ms with the options, %.1f ms without; want it lower with them",
			on.CopyTimeToAck.P99Millis, off.CopyTimeToAck.P99Millis)
	}

	// The operator's turn, on the options-on namespace, with the real
	// tool: idemgate failed lists the FAILED keys grouped by reason, and
	// idemgate retry -reason makes each of them claimable again.
	idemgate, err := testenv.GoBuild("github.com/idemgate/idemgate/cmd/idemgate")
	if err != nil {
		t.Fatal(err)
	}
	storeURL := "datastore://idemgate-e2e?namespace=" + nsOn
	tool := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), idemgate, args...)
		cmd.Env = append(os.Environ(), "DATASTORE_EMULATOR_HOST="+host)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("idemgate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var keys []string
	for _, o := range on.PoisonOrders {
		keys = append(keys, "order_id:"+o.OrderID)
	}
	listed := tool("failed", "-store", storeURL, "-json")
	dec := json.NewDecoder(strings.NewReader(listed))
	var counts struct {
		Failed  int `json:"failed"`
		Reasons []struct {
			Reason string `json:"reason"`
			Count  int    `json:"count"`
		} `json:"reasons"`
	}
	if err := dec.Decode(&counts); err != nil {
		t.Fatalf("idemgate failed -json: %v\n%s", err, listed)
	}
	var got []string
	for {
		var rec struct {
			Key      string `json:"key"`
			Attempts int    `json:"attempts"`
			Reason   string `json:"reason"`
		}
		if err := dec.Decode(&rec); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("idemgate failed -json: %v\n%s", err, listed)
		}
		got = append(got, rec.Key)
		if !strings.Contains(rec.Reason, "422") || rec.Attempts < 1 || rec.Attempts > gatewayBudget {
			t.Errorf("FAILED %s: reason %q after %d attempts; want the supplier's 422, after 1 to %d attempts", rec.Key, rec.Reason, rec.Attempts, gatewayBudget)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, keys) || counts.Failed != len(keys) || len(counts.Reasons) != 1 || counts.Reasons[0].Count != len(keys) {
		t.Fatalf("idemgate failed listed %v (%d keys, reasons %+v); want the poison orders' %v under one reason", got, counts.Failed, counts.Reasons, keys)
	}
	t.Logf("idemgate failed: %d keys, reason %q", counts.Failed, counts.Reasons[0].Reason)
	retried := tool("retry", "-store", storeURL, "-reason", "supplier answered 422")
	if want := fmt.Sprintf("retried %d of %d.", len(keys), len(keys)); !strings.Contains(retried, want) {
		t.Fatalf("idemgate retry -reason: %s; want %q", retried, want)
	}
	st := datastoreStore(t, host, nsOn)

	// The supplier is fixed (a fresh one, with no poison), and the dead
	// letters are delivered again: each poison order is accepted once.
	replay := runPushstorm(t, pushstorm, filepath.Join(dir, "replay.log"),
		append(slices.Clone(optionsOn), "IDEMGATE_STORE=datastore://idemgate-e2e?namespace="+nsOn, "DATASTORE_EMULATOR_HOST="+host),
		"-path", "/orders", "-supplier", "127.0.0.1:0", "-json", "-expect-once", "-replay-dead", filepath.Join(dir, "on.jsonl"),
		"-dup", "0", "-concurrent", "0", "-backoff-min", "200ms", "-backoff-max", "1s", "-max-attempts", strconv.Itoa(stormAttempts))
	s := replay.Supplier
	if replay.Messages != len(keys) || s.Hits != len(keys) || s.Accepted != len(keys) || !replay.ExactlyOnce {
		t.Errorf("replay of %d dead letters: %d messages, supplier %d requests, %d accepted, exactly once %v; want each poison order accepted exactly once",
			len(keys), replay.Messages, s.Hits, s.Accepted, replay.ExactlyOnce)
	}
	if left := listFailed(t, st); len(left) > 0 {
		t.Errorf("after the replay %d keys are still FAILED: %v", len(left), recordKeys(left))
	}
	t.Logf("replay after the fix: %d dead letters, %d supplier requests, %d accepted", replay.Messages, s.Hits, s.Accepted)
}

// poisonCount is how many orders -poison makes poison.
func poisonCount() int {
	share, _ := strconv.ParseFloat(poisonShare, 64)
	return int(share*poisonOrders + 0.5)
}

// stormReport is the part of pushstorm's JSON report the test reads.
type stormReport struct {
	Messages    int            `json:"messages"`
	Deliveries  int            `json:"deliveries"`
	Status      map[string]int `json:"status"`
	ExactlyOnce bool           `json:"exactly_once"`
	Duration    float64        `json:"duration_seconds"`
	Classes     map[string]struct {
		Orders       int            `json:"orders"`
		Deliveries   int            `json:"deliveries"`
		Status       map[string]int `json:"status"`
		DeadLettered int            `json:"dead_lettered_messages"`
		BodyRuns     int            `json:"body_runs"`
	} `json:"classes"`
	PoisonOrders []struct {
		OrderID      string `json:"order_id"`
		BodyRuns     int    `json:"body_runs"`
		DeadLettered bool   `json:"dead_lettered"`
	} `json:"poison_orders"`
	CopyTimeToAck struct {
		Copies    int     `json:"copies"`
		Acked     int     `json:"acked"`
		P50Millis float64 `json:"p50_ms"`
		P99Millis float64 `json:"p99_ms"`
	} `json:"copy_time_to_ack"`
	Supplier struct {
		Hits     int `json:"hits"`
		Accepted int `json:"accepted"`
	} `json:"supplier"`
	Problems []string `json:"problems"`
}

// runPushstorm runs pushstorm with args against an example-run it spawns
// (env is added to both), and returns its report. Their logs go to
// logPath, whose end is shown if the run fails.
func runPushstorm(t *testing.T, pushstorm, logPath string, env []string, args ...string) stormReport {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(t.Context(), pushstorm, append([]string{"-spawn", binary(t)}, args...)...)
	cmd.Env = append(os.Environ(), "LOG_LEVEL=warn", "IDEMGATE_METRICS=", "IDEMGATE_DISABLED=", "IDEMGATE_LEASE=")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, logFile
	runErr := cmd.Run()
	var r stormReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || runErr != nil {
		b, _ := os.ReadFile(logPath)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Fatalf("pushstorm %s: %v (report: %v)\n%s\nlog (end):\n%s", strings.Join(args, " "), runErr, err, out.Bytes(), b)
	}
	return r
}

// compare renders the figures of the two runs side by side.
func compare(off, on stormReport) [][3]string {
	row := func(name string, f func(r stormReport) string) [3]string { return [3]string{name, f(off), f(on)} }
	n := func(f func(r stormReport) int) func(stormReport) string {
		return func(r stormReport) string { return strconv.Itoa(f(r)) }
	}
	ms := func(f func(r stormReport) float64) func(stormReport) string {
		return func(r stormReport) string { return fmt.Sprintf("%.1f ms", f(r)) }
	}
	return [][3]string{
		row("poison body runs", n(func(r stormReport) int { return r.Classes["poison"].BodyRuns })),
		row("poison deliveries", n(func(r stormReport) int { return r.Classes["poison"].Deliveries })),
		row("poison dead-lettered", n(func(r stormReport) int { return r.Classes["poison"].DeadLettered })),
		row("copies' deliveries", n(func(r stormReport) int { return r.Classes["concurrent_copy"].Deliveries })),
		row("copies' 503s", n(func(r stormReport) int { return r.Classes["concurrent_copy"].Status["503"] })),
		row("all 503s", n(func(r stormReport) int { return r.Status["503"] })),
		row("copy time-to-ack p50", ms(func(r stormReport) float64 { return r.CopyTimeToAck.P50Millis })),
		row("copy time-to-ack p99", ms(func(r stormReport) float64 { return r.CopyTimeToAck.P99Millis })),
		row("deliveries", n(func(r stormReport) int { return r.Deliveries })),
		row("duration", func(r stormReport) string { return fmt.Sprintf("%.2f s", r.Duration) }),
	}
}

// datastoreStore opens the records of example-run's namespace ns on the
// emulator at host.
func datastoreStore(t *testing.T, host, ns string) store.Lister {
	t.Helper()
	c, err := datastore.NewClient(t.Context(), "idemgate-e2e",
		option.WithEndpoint("passthrough:///"+host),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	st, err := datastorestore.New(c, &datastorestore.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// listFailed lists every FAILED record of st, as idemgate failed does.
func listFailed(t *testing.T, st store.Lister) []store.Record {
	t.Helper()
	var recs []store.Record
	opts := store.ListOptions{States: store.StateFailed}
	for {
		page, err := st.List(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, page.Records...)
		if opts.Cursor = page.Next; opts.Cursor == "" {
			return recs
		}
	}
}

// recordKeys returns the keys of recs.
func recordKeys(recs []store.Record) []string {
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	return keys
}
