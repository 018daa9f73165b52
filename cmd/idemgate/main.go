// Command idemgate is the operator's tool for idemgate's stores. It answers
// "why was this message dropped as a duplicate?" and "run this one again"
// without SQL, Lua or Datastore queries written by hand, and checks a store
// before a deploy.
//
// Usage:
//
//	idemgate inspect [-json] KEY…   show the records of KEYs
//	idemgate list [-state S,…] [-prefix P] [-older D]  list records by state and age: what is stuck?
//	idemgate failed [-reason R] [-prefix P] [-older D]  list the FAILED records by reason, and the outbox's dead messages
//	idemgate retry KEY… | -reason R [-prefix P] [-older D]  make FAILED records claimable again
//	idemgate forget [-yes] [-force] KEY…  free KEYs: their next delivery runs the work again
//	idemgate settle [-yes] KEY…     record KEYs done once the sink shows the work: their redeliveries are acked
//	idemgate purge [-batch N]       delete expired records, where the store needs it
//	idemgate check [-max-skew D]    verify that the store is ready for a deploy
//	idemgate digest KEY…            print the digests that stand for KEYs in logs under HideKeys
//	idemgate childkey PARENT NAME   print the child key of message NAME published under PARENT
//	idemgate relay -project P       publish a store's outbox to Pub/Sub, until interrupted
//	idemgate relay -dead | -revive ID,…  list the outbox's dead messages, or revive them
//	idemgate version                print the module's version and build information
//
// Every command takes -store URL (default $IDEMGATE_STORE), in the form the
// examples take (redis://…, postgres://…, mysql://…, sqlite:///…,
// datastore://project, firestore://project; see docs/operations.md), and
// -timeout, which bounds the whole command, connecting included (but not
// the time forget's question waits for an answer, and only the start-up of
// relay, which then runs until interrupted). Every answer names the
// store and the table, key prefix, kind and namespace or collection it
// read. Flags may follow the KEYs; "--" ends the flags, for a key that
// starts with '-'.
//
// Exit status: 0 when the command did what was asked (inspect found the
// records or their absence; check found no problem); 1 when check found a
// problem, an operation failed, a KEY given to retry, forget or settle had
// nothing to retry or forget or could not be settled, the store could not be opened or reached, or a
// forget was not confirmed; 2 for a usage error.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

func main() {
	// go-redis logs its connection pool's troubles on stderr by itself,
	// before the tool's own error says the same in one line: keep them for
	// IDEMGATE_DEBUG=1.
	var h slog.Handler = slog.DiscardHandler
	if os.Getenv(debugEnv) == "1" {
		h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	redis.SetLogger(storeurl.RedisLogger{Logger: slog.New(h), Level: slog.LevelDebug})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// The exit statuses.
const (
	exitOK      = 0
	exitProblem = 1 // a problem found, or an operation that failed
	exitUsage   = 2
)

// storeEnv names the variable that gives the store URL when -store does
// not, as for the examples.
const storeEnv = "IDEMGATE_STORE"

// debugEnv names the variable that, set to 1, shows the store client's own
// log lines (go-redis's) on stderr.
const debugEnv = "IDEMGATE_DEBUG"

const usage = `usage: idemgate COMMAND [flags] [args]

Commands:
  inspect [-json] KEY…   show the records of KEYs: state, fence, lease, expiry
  list [-state held,lapsed,released,done,failed] [-prefix P] [-older D]
       [-limit N] [-cursor C]
                         list the records in those states for at least D,
                         a page at a time: what is stuck?
  failed [-reason R] [-prefix P] [-older D] [-json] [-keys]
                         list the FAILED records (the work failed for good)
                         grouped by reason, newest failure first, and the
                         outbox's dead messages by reason
  retry KEY… | retry -reason R [-prefix P] [-older D] [-dry-run]
                         make FAILED records claimable again, with a fresh
                         budget of attempts: their next delivery runs the work
  forget [-yes] [-force] KEY…
                         free KEYs at once, whatever their state, with a higher
                         fence: their next delivery runs the work again; only
                         the records shown are forgotten, unless -force
  settle [-yes] KEY…     record KEYs as done, for an operator who found the work in
                         the sink (a lapsed claim's holder crashed after it):
                         their redeliveries are acknowledged; exits 1 for a KEY
                         not settled
  purge [-batch N]       delete expired records (SQL stores; the others expire
                         records by themselves)
  check [-max-skew D]    verify the store before a deploy: reachable, table in
                         place, clock skew, Redis eviction policy
  digest KEY…            print the digest that stands for each KEY in the
                         gateway's logs under HideKeys (its key_digest)
  childkey PARENT NAME   print the child key of the message NAME that a body
                         published under the claimed key PARENT (the
                         idemgate-child-key attribute)
  relay -project P       publish the messages of a store's outbox (SQL,
                         Datastore, Firestore) to Pub/Sub until interrupted
                         (see package relay); logs JSON lines on stderr
  relay -dead | -revive ID,…
                         list the outbox's dead messages (given up after
                         -max-attempts refused publishes), or revive them
  version                print the module's version, Go release and VCS revision

Every command takes:
  -store URL       the store (default $IDEMGATE_STORE): redis://host:6379/0,
                   postgres://…, mysql://user:pass@host:3306/db,
                   sqlite:///path/file.db, datastore://project, firestore://project
  -timeout D       bound on the whole command, connecting included (forget's
                   question waits for its answer regardless; relay's run
                   is bounded only at start-up)

Every answer names the store and where in it the records are read (table,
key prefix, kind and namespace, or collection), "(default)" when the URL does
not say. Flags may follow the KEYs; "--" ends the flags. IDEMGATE_DEBUG=1
shows the store client's own log lines on stderr.

Run "idemgate COMMAND -h" for a command's flags.

Exit status:
  0  done as asked (for check: no problem found)
  1  a problem found, an operation failed, a KEY given to retry, forget or
     settle had nothing to retry or forget or could not be settled, the
     store could not be reached, or a
     forget was not confirmed
  2  usage error
`

// commands maps each command to its function.
var commands = map[string]func(*cli, context.Context, []string) int{
	"inspect":  (*cli).inspect,
	"list":     (*cli).list,
	"failed":   (*cli).failed,
	"retry":    (*cli).retry,
	"forget":   (*cli).forget,
	"settle":   (*cli).settle,
	"purge":    (*cli).purge,
	"check":    (*cli).check,
	"digest":   (*cli).digest,
	"childkey": (*cli).childKey,
	"relay":    (*cli).relay,
	"version":  (*cli).version,
}

// run runs the command line args (without the program name) and returns
// the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: bufio.NewReader(stdin), stdout: stdout, stderr: stderr, terminal: isTerminal(stdin)}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "idemgate: unknown command %q (want inspect, list, failed, retry, forget, settle, purge, check, digest, childkey, relay or version; idemgate -h for help)\n", args[0])
		return exitUsage
	}
	return cmd(c, ctx, args[1:])
}

// cli is one run of the command: its streams.
type cli struct {
	stdin          *bufio.Reader
	stdout, stderr io.Writer
	// terminal says that stdin is a terminal, which echoes the answer to
	// forget's question and its newline.
	terminal bool
}

// isTerminal reports whether r is a character device, such as a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// common are the flags every command takes.
type common struct {
	store   string
	timeout time.Duration
	usage   func(io.Writer) // prints the command's help
}

// flags returns the flag set of command name, with the common flags.
// timeout is the command's default -timeout.
func (c *cli) flags(name, args, help string, timeout time.Duration) (*flag.FlagSet, *common) {
	fs, cm := c.flagSet(name, args, help)
	// The default is read in open, not here: the help must not print a
	// URL that may hold a password.
	fs.StringVar(&cm.store, "store", "", "store `URL` (default $"+storeEnv+")")
	fs.DurationVar(&cm.timeout, "timeout", timeout, "bound on the whole command, connecting included (not the wait for forget's answer)")
	return fs, cm
}

// flagSet returns the flag set of command name, without flags.
func (c *cli) flagSet(name, args, help string) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet("idemgate "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	var cm common
	// parse prints the help: on stdout when it was asked for, on stderr
	// after a usage error.
	fs.Usage = func() {}
	cm.usage = func(w io.Writer) {
		fs.SetOutput(w)
		defer fs.SetOutput(c.stderr)
		fmt.Fprintf(w, "usage: idemgate %s [flags] %s\n\n%s", name, args, help)
		if hasFlags(fs) {
			fmt.Fprint(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
		fmt.Fprint(w, "\nExit status: 0 done as asked, 1 problem found or operation failed, 2 usage error.\n")
	}
	return fs, &cm
}

// hasFlags reports whether fs defines a flag.
func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parse parses args into fs, flags and arguments in any order up to a
// "--", and returns the arguments, or the exit status to return if parsing
// ends the command.
func (c *cli) parse(fs *flag.FlagSet, cm *common, args []string) (rest []string, code int, done bool) {
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			cm.usage(c.stdout)
			return nil, exitOK, true
		case err != nil:
			cm.usage(c.stderr) // after the flag package's line about the error
			return nil, exitUsage, true
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, 0, false
		}
		if n := len(args) - len(left); n > 0 && args[n-1] == "--" {
			return append(rest, left...), 0, false
		}
		// A flag may follow an argument: take the argument, parse on.
		rest, args = append(rest, left[0]), left[1:]
	}
}

// errUsage marks an error that is the caller's to fix on the command line.
var errUsage = errors.New("usage")

// open opens the store of cm for an operator's command, within ctx.
func (c *cli) open(ctx context.Context, cm *common) (*storeurl.Opened, error) {
	if cm.store == "" {
		cm.store = os.Getenv(storeEnv)
	}
	switch u := strings.TrimSpace(cm.store); {
	case u == "":
		return nil, fmt.Errorf("%w: no store: give -store URL or set %s", errUsage, storeEnv)
	case strings.HasPrefix(u, "memory://"), strings.HasPrefix(u, "mem://"):
		return nil, fmt.Errorf("%w: %s is the store of one process, which no other process can see: give the URL of the shared store your service uses", errUsage, u)
	}
	o, err := storeurl.OpenExisting(ctx, cm.store)
	if ue := (*storeurl.URLError)(nil); errors.As(err, &ue) {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, err
}

// fail prints err on one line and returns the exit status it calls for.
// ctx is the command's: when its deadline has passed, the message says so.
func (c *cli) fail(ctx context.Context, cm *common, err error) int {
	fmt.Fprintln(c.stderr, "idemgate:", oneLine(c.explain(ctx, cm, err)))
	if errors.Is(err, errUsage) {
		return exitUsage
	}
	return exitProblem
}

// oneLine folds a multi-line message (a joined error) onto one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}

// inspector returns o's store as a store.Inspector.
func inspector(o *storeurl.Opened) (store.Inspector, error) {
	x, ok := o.Store.(store.Inspector)
	if !ok {
		return nil, fmt.Errorf("the %s store cannot inspect records", o.Name)
	}
	return x, nil
}

// lister returns o's store as a store.Lister.
func lister(o *storeurl.Opened) (store.Lister, error) {
	x, ok := o.Store.(store.Lister)
	if !ok {
		return nil, fmt.Errorf("the %s store cannot list records", o.Name)
	}
	return x, nil
}

// checkKeys refuses keys no store accepts, before anything is opened.
func checkKeys(keys []string) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: no KEY given", errUsage)
	}
	for _, k := range keys {
		if err := store.CheckKey(k); err != nil {
			return fmt.Errorf("%w: key %.40q: %w", errUsage, k, err)
		}
	}
	return nil
}

// withKeys runs fn, within cm's timeout, on the Inspector of cm's store
// and keys, and returns the exit status. inspect and forget need a SQL
// store's table in place: they create nothing.
func (c *cli) withKeys(ctx context.Context, cm *common, keys []string, fn func(context.Context, *storeurl.Opened, store.Inspector, []string) error) int {
	if err := checkKeys(keys); err != nil {
		return c.fail(ctx, cm, err)
	}
	return c.withStore(ctx, cm, func(ctx context.Context, o *storeurl.Opened) error {
		x, err := inspector(o)
		if err != nil {
			return err
		}
		return fn(ctx, o, x, keys)
	})
}

// withStore runs fn, within cm's timeout, on cm's store once its SQL
// table, if it has one, is known to be in place, and returns the exit
// status.
func (c *cli) withStore(ctx context.Context, cm *common, fn func(context.Context, *storeurl.Opened) error) int {
	ctx, cancel := context.WithTimeout(ctx, cm.timeout)
	defer cancel()
	o, err := c.open(ctx, cm)
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	defer o.Close()
	if err = tableReady(ctx, o); err == nil {
		err = fn(ctx, o)
	}
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	return exitOK
}

// tableOwner is a store kept in a table (sqlstore).
type tableOwner interface {
	TableExists(ctx context.Context) (bool, error)
}

// noTable reports that o's table or index is missing.
func noTable(o *storeurl.Opened) error {
	return fmt.Errorf("%s: the table, its index on expires_at or one of its fingerprint, origin, attempts, reason and first_failure columns is missing "+
		"(the URL parameter table names the table): the service creates them when it starts (CreateTable), "+
		"or see docs/stores/sql.md for the DDL and the upgrade", o.Where())
}

// tableReady fails when o is a SQL store whose table is not in place.
func tableReady(ctx context.Context, o *storeurl.Opened) error {
	t, ok := o.Store.(tableOwner)
	if !ok {
		return nil
	}
	exists, err := t.TableExists(ctx)
	switch {
	case err != nil:
		return err
	case !exists:
		return noTable(o)
	}
	return nil
}
