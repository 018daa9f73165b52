package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Form names the push body shape of a subscription.
const (
	formWrapped   = "wrapped"
	formUnwrapped = "unwrapped"
)

// Named values of -expect-keys.
const (
	expectAuto     = "auto"
	expectOrders   = "orders"
	expectMessages = "messages"
)

// config is everything a run needs, as parsed from the command line.
type config struct {
	URL          string
	N            int
	Concurrency  int
	Dup          float64 // probability of one transport redelivery after an ack
	Concurrent   float64 // probability that the first attempt goes out as two copies
	Republish    float64 // probability of a second publish of the same order
	Poison       float64 // share of the orders the supplier refuses for good (422)
	AckEachCopy  bool    // a nacked concurrent copy is redelivered until acked itself
	MaxAttempts  int     // 0 = never dead-letter
	BackoffMin   time.Duration
	BackoffMax   time.Duration
	Timeout      time.Duration // per delivery; Pub/Sub's ack deadline for push
	Form         string
	Subscription string
	OrderPrefix  string // order_id = prefix + 6-digit number
	Seed         int64  // 0 = derive from the clock
	Attrs        map[string]string
	JSON         bool
	DeadLetters  string // file the dead-lettered messages are written to
	ReplayDead   string // file of dead letters delivered instead of new orders

	SupplierAddr      string // "" = no supplier
	SupplierFailFirst int
	SupplierDelay     time.Duration
	ExpectOnce        bool
	ExpectKeys        string // auto, orders, messages or a number

	SelfTest bool

	Spawn string // a command to start as the endpoint (gets PORT and SUPPLIER_URL)
	Path  string // the path of the spawned endpoint to deliver to
}

// attrFlag collects repeated -attr key=value flags.
type attrFlag map[string]string

func (a attrFlag) String() string {
	parts := make([]string, 0, len(a))
	for k, v := range a {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (a attrFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	a[k] = v
	return nil
}

const usageHead = `pushstorm sends Pub/Sub push deliveries to an HTTP endpoint, with injected
duplicates, concurrent copies, producer republishes and redelivery on nack,
then prints what happened.

Usage:
  pushstorm -url http://127.0.0.1:8080/orders [flags]
  pushstorm -self-test [flags]
  pushstorm -supplier 127.0.0.1:9099            (supplier only, until interrupted)

Ack rule: a delivery is acked when the endpoint answers 102, 200, 201, 202 or
204, as the real Pub/Sub push does (the Pub/Sub emulator nacks 202). Any other
status, a network error or no answer within -timeout is a nack: the message is
redelivered after an exponential backoff with deliveryAttempt+1, and
dead-lettered when attempt number -max-attempts is nacked.

Exit status: 0 when every message was acked but those of -poison orders,
which are meant to be dead-lettered (and the -expect-once check passed); 1
when another message was dead-lettered or lost, or a check failed; 2 for
bad flags.

Flags:
`

// parseConfig parses args (without the program name). Usage and flag errors
// are written to stderr; flag.ErrHelp comes back for -h.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	c := config{Attrs: map[string]string{}}
	fs := flag.NewFlagSet("pushstorm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.URL, "url", "", "push endpoint to deliver to (required unless -self-test or supplier-only)")
	fs.IntVar(&c.N, "n", 100, "number of orders (logical events) to publish")
	fs.IntVar(&c.Concurrency, "concurrency", 16, "deliveries in flight at once")
	fs.Float64Var(&c.Dup, "dup", 0.2, "probability that a message is delivered again after it was acked (lost ack, transport redelivery)")
	fs.Float64Var(&c.Concurrent, "concurrent", 0.1, "probability that a message's first delivery goes out as two simultaneous copies")
	fs.Float64Var(&c.Republish, "republish", 0.1, "probability that the producer publishes an order twice (new messageId, same order_id)")
	fs.Float64Var(&c.Poison, "poison", 0, "share of the orders (chosen from -seed) that are poison: the supplier refuses every request of theirs with 422 until POST /fix")
	fs.BoolVar(&c.AckEachCopy, "ack-each-copy", false, "a concurrent copy that is nacked is redelivered on its own until acked, as when the first delivery's ack deadline passed; default: an ack of either copy acks both")
	fs.StringVar(&c.DeadLetters, "dead-letters", "", "write the dead-lettered messages to this file, one JSON object a line, for -replay-dead")
	fs.StringVar(&c.ReplayDead, "replay-dead", "", "deliver the messages of this -dead-letters file (same messageIds, attempt 1) instead of new orders; -n is ignored")
	fs.IntVar(&c.MaxAttempts, "max-attempts", 10, "dead-letter a message when its delivery attempt number N is nacked (0 = never)")
	fs.DurationVar(&c.BackoffMin, "backoff-min", 100*time.Millisecond, "first redelivery delay after a nack (Pub/Sub retry policy minimumBackoff)")
	fs.DurationVar(&c.BackoffMax, "backoff-max", 2*time.Second, "cap of the doubling redelivery delay (retry policy maximumBackoff)")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Second, "time allowed for one delivery; no answer in time is a nack")
	fs.DurationVar(&c.Timeout, "ack-deadline", 10*time.Second, "alias of -timeout (Pub/Sub uses the ack deadline as the push timeout)")
	fs.StringVar(&c.Form, "form", formWrapped, "push body form: wrapped (JSON envelope) or unwrapped (raw data, metadata in x-goog-pubsub-* headers)")
	fs.StringVar(&c.Subscription, "subscription", "projects/demo/subscriptions/orders", "subscription name sent with each delivery")
	fs.StringVar(&c.OrderPrefix, "order-prefix", "o-", "order_id prefix; change it between runs against a server whose store remembers the last run's orders")
	fs.Int64Var(&c.Seed, "seed", 0, "random seed for the chaos decisions (0 = from the clock; the report prints the seed used)")
	fs.Var(attrFlag(c.Attrs), "attr", "extra message attribute key=value (repeatable)")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON instead of a table")
	fs.StringVar(&c.SupplierAddr, "supplier", "", "start a counting supplier on this address (e.g. :9099 or 127.0.0.1:0) and report what it saw")
	fs.IntVar(&c.SupplierFailFirst, "supplier-fail-first", 0, "the supplier answers 500 to the first N requests of each Idempotency-Key")
	fs.DurationVar(&c.SupplierDelay, "supplier-delay", 0, "time the supplier spends on each request (widens overlap windows)")
	fs.BoolVar(&c.ExpectOnce, "expect-once", false, "fail unless the supplier accepted every key exactly once and saw the expected number of keys")
	fs.StringVar(&c.ExpectKeys, "expect-keys", expectAuto, "distinct keys -expect-once wants: a number, orders (-n), messages (messageIds published), or auto (orders when the URL path ends in /orders, else messages)")
	fs.StringVar(&c.Spawn, "spawn", "", "start this command as the endpoint, with PORT (a free port) and SUPPLIER_URL (the -supplier) in its environment; it must answer GET /healthz; stopped with SIGTERM at the end")
	fs.StringVar(&c.Path, "path", "/", "with -spawn: the path to deliver to, e.g. /orders")
	fs.BoolVar(&c.SelfTest, "self-test", false, "run against an in-process endpoint that dedupes on order_id and posts to an in-process supplier; implies -expect-once")

	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, usageError(fs, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if c.SelfTest {
		c.ExpectOnce = true
	}
	if err := c.validate(); err != nil {
		return config{}, usageError(fs, err)
	}
	return c, nil
}

// usageError prints err, one line per problem, and a pointer to -h.
func usageError(fs *flag.FlagSet, err error) error {
	for line := range strings.Lines(err.Error()) {
		fmt.Fprintf(fs.Output(), "pushstorm: %s\n", strings.TrimSuffix(line, "\n"))
	}
	fmt.Fprintln(fs.Output(), "run pushstorm -h for usage")
	return err
}

// supplierOnly reports whether the run only serves the supplier.
func (c config) supplierOnly() bool {
	return c.URL == "" && !c.SelfTest && c.Spawn == "" && c.SupplierAddr != ""
}

func (c config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	switch {
	case c.SelfTest:
		check(c.URL == "" && c.Spawn == "", "-url, -spawn and -self-test are exclusive")
	case c.Spawn != "":
		check(c.URL == "", "-url and -spawn are exclusive")
		check(strings.HasPrefix(c.Path, "/"), "-path must start with /, got %q", c.Path)
	case c.URL == "" && c.SupplierAddr == "":
		errs = append(errs, errors.New("-url is required (or -self-test, or -supplier alone to run only the supplier)"))
	case c.URL != "":
		u, err := url.Parse(c.URL)
		check(err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "",
			"-url %q is not an http(s) URL", c.URL)
	}
	check(c.N > 0, "-n must be positive, got %d", c.N)
	check(c.Concurrency > 0, "-concurrency must be positive, got %d", c.Concurrency)
	for _, p := range []struct {
		name string
		v    float64
	}{{"dup", c.Dup}, {"concurrent", c.Concurrent}, {"republish", c.Republish}, {"poison", c.Poison}} {
		check(p.v >= 0 && p.v <= 1, "-%s is a probability in [0,1], got %v", p.name, p.v)
	}
	check(c.MaxAttempts >= 0, "-max-attempts must be >= 0, got %d", c.MaxAttempts)
	check(c.BackoffMin >= 0, "-backoff-min must be >= 0, got %v", c.BackoffMin)
	check(c.BackoffMax >= c.BackoffMin, "-backoff-max (%v) is below -backoff-min (%v)", c.BackoffMax, c.BackoffMin)
	check(c.Timeout > 0, "-timeout must be positive, got %v", c.Timeout)
	check(c.Form == formWrapped || c.Form == formUnwrapped, "-form must be wrapped or unwrapped, got %q", c.Form)
	check(c.Subscription != "", "-subscription must not be empty")
	check(c.SupplierFailFirst >= 0, "-supplier-fail-first must be >= 0, got %d", c.SupplierFailFirst)
	check(c.SupplierDelay >= 0, "-supplier-delay must be >= 0, got %v", c.SupplierDelay)
	check(c.Poison == 0 || c.SupplierAddr != "" || c.SelfTest, "-poison needs -supplier (the supplier is what refuses the poison orders)")
	check(c.Poison == 0 || c.ReplayDead == "", "-poison and -replay-dead are exclusive: a replay comes after the fix")
	check(!c.ExpectOnce || c.SupplierAddr != "" || c.SelfTest, "-expect-once needs -supplier (pushstorm can only check a supplier it runs)")
	if c.ExpectKeys != expectAuto && c.ExpectKeys != expectOrders && c.ExpectKeys != expectMessages {
		n, err := strconv.Atoi(c.ExpectKeys)
		check(err == nil && n >= 0, "-expect-keys must be a number, orders, messages or auto, got %q", c.ExpectKeys)
	}
	for k := range c.Attrs {
		check(k != "order_id" && k != "po_id", "-attr %s would overwrite a generated attribute", k)
	}
	return errors.Join(errs...)
}

// expectation is how many distinct Idempotency-Keys the supplier should see.
type expectation struct {
	Keys int    `json:"keys"`
	Unit string `json:"unit"` // what one key stands for: orders, messages or keys
	Why  string `json:"why"`
}

// expectedKeys resolves -expect-keys for a run that published the given
// number of orders and messages.
//
// The supplier sees one Idempotency-Key per execution of the business action,
// so the right count depends on what the endpoint dedupes on: a route keyed on
// order_id (the example's /orders) must run once per order, even for producer
// republishes; a route keyed on messageId (/ and /po-updates) runs once per
// published message, republishes included, since they carry new messageIds.
func (c config) expectedKeys(orders, messages int) expectation {
	switch c.ExpectKeys {
	case expectOrders:
		return expectation{orders, "orders", "one per order_id"}
	case expectMessages:
		return expectation{messages, "messages", "one per published messageId"}
	case expectAuto:
		if c.SelfTest || pathEndsWith(c.URL, "/orders") {
			return expectation{orders, "orders", "one per order_id, as the path ends in /orders"}
		}
		return expectation{messages, "messages", "one per published messageId, as the path does not end in /orders"}
	}
	n, _ := strconv.Atoi(c.ExpectKeys) // validated
	return expectation{n, "keys", "as -expect-keys says"}
}

func pathEndsWith(raw, suffix string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	return strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), suffix)
}
