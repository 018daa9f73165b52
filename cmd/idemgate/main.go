// Command idemgate is the operator's tool for idemgate's stores. It answers
// "why was this message dropped as a duplicate?" and "run this one again"
// without SQL, Lua or Datastore queries written by hand, and checks a store
// before a deploy.
//
// Usage:
//
//	idemgate inspect [-json] KEY…   show the records of KEYs
//	idemgate forget [-yes] [-force] KEY…  free KEYs: their next delivery runs the work again
//	idemgate purge [-batch N]       delete expired records, where the store needs it
//	idemgate check [-max-skew D]    verify that the store is ready for a deploy
//
// Every command takes -store URL (default $IDEMGATE_STORE), in the form the
// examples take (redis://…, postgres://…, mysql://…, sqlite:///…,
// datastore://project, firestore://project; see docs/operations.md), and
// -timeout, which bounds the whole command, connecting included (but not
// the time forget's question waits for an answer).
//
// Exit status: 0 when the command did what was asked (inspect found the
// records or their absence; check found no problem); 1 when check found a
// problem, an operation failed, the store could not be opened or reached,
// or a forget was not confirmed; 2 for a usage error.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/internal/storeurl"
	"github.com/idemgate/idemgate/store"
)

func main() {
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

const usage = `usage: idemgate COMMAND [flags] [args]

Commands:
  inspect [-json] KEY…   show the records of KEYs: state, fence, lease, expiry
  forget [-yes] [-force] KEY…
                         free KEYs at once, whatever their state, with a higher
                         fence: their next delivery runs the work again; only
                         the records shown are forgotten, unless -force
  purge [-batch N]       delete expired records (SQL stores; the others expire
                         records by themselves)
  check [-max-skew D]    verify the store before a deploy: reachable, table in
                         place, clock skew, Redis eviction policy

Every command takes:
  -store URL       the store (default $IDEMGATE_STORE): redis://host:6379/0,
                   postgres://…, mysql://user:pass@tcp(host:3306)/db,
                   sqlite:///path/file.db, datastore://project, firestore://project
  -timeout D       bound on the whole command, connecting included (forget's
                   question waits for its answer regardless)

Run "idemgate COMMAND -h" for a command's flags.

Exit status:
  0  done as asked (for check: no problem found)
  1  a problem found, an operation failed, the store could not be reached,
     or a forget was not confirmed
  2  usage error
`

// commands maps each command to its function.
var commands = map[string]func(*cli, context.Context, []string) int{
	"inspect": (*cli).inspect,
	"forget":  (*cli).forget,
	"purge":   (*cli).purge,
	"check":   (*cli).check,
}

// run runs the command line args (without the program name) and returns
// the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: bufio.NewReader(stdin), stdout: stdout, stderr: stderr}
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
		fmt.Fprintf(stderr, "idemgate: unknown command %q (want inspect, forget, purge or check; idemgate -h for help)\n", args[0])
		return exitUsage
	}
	return cmd(c, ctx, args[1:])
}

// cli is one run of the command: its streams.
type cli struct {
	stdin          *bufio.Reader
	stdout, stderr io.Writer
}

// common are the flags every command takes.
type common struct {
	store   string
	timeout time.Duration
}

// flags returns the flag set of command name, with the common flags.
// timeout is the command's default -timeout.
func (c *cli) flags(name, args, help string, timeout time.Duration) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet("idemgate "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	var cm common
	// The default is read in open, not here: the help must not print a
	// URL that may hold a password.
	fs.StringVar(&cm.store, "store", "", "store `URL` (default $"+storeEnv+")")
	fs.DurationVar(&cm.timeout, "timeout", timeout, "bound on the whole command, connecting included (not the wait for forget's answer)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: idemgate %s [flags] %s\n\n%s\nFlags:\n", name, args, help)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\nExit status: 0 done as asked, 1 problem found or operation failed, 2 usage error.\n")
	}
	return fs, &cm
}

// parse parses args into fs and reports the exit status to return, if
// parsing ends the command.
func parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK, true
	case err != nil:
		return exitUsage, true // the flag package has printed the error and the usage
	}
	return 0, false
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
	return storeurl.OpenExisting(ctx, cm.store)
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
func (c *cli) withKeys(ctx context.Context, cm *common, keys []string, fn func(context.Context, store.Inspector, []string) error) int {
	ctx, cancel := context.WithTimeout(ctx, cm.timeout)
	defer cancel()
	err := checkKeys(keys)
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	o, err := c.open(ctx, cm)
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	defer o.Close()
	x, err := inspector(o)
	if err == nil {
		err = tableReady(ctx, o)
	}
	if err == nil {
		err = fn(ctx, x, keys)
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

// errNoTable reports a SQL store whose table or index is missing.
var errNoTable = errors.New("the store's table (URL parameter table, default idemgate_records), its index on expires_at or its fingerprint column is missing: " +
	"the service creates them when it starts (CreateTable), or see docs/stores/sql.md for the DDL and the upgrade")

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
		return errNoTable
	}
	return nil
}
