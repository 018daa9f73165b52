package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// PostgresDSN returns the URL of a PostgreSQL database for tests:
// $POSTGRES_DSN; else database test on 127.0.0.1:5432 if a server listens
// there and lets user postgres (or root) in; else a postgres started from
// /usr/lib/postgresql/*/bin on a free port. Tests must isolate themselves
// with unique table names.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("POSTGRES_DSN"); d != "" {
		return d
	}
	dsn, err := postgresDSN()
	if err != nil {
		Unavailable(t, "PostgreSQL: set POSTGRES_DSN or install postgresql (apt install postgresql): %v", err)
	}
	return dsn
}

// postgresDSN finds a server once per test binary and remembers the
// answer, failure included.
var postgresDSN = sync.OnceValues(findPostgres)

func findPostgres() (string, error) {
	var errs []error
	if Listening("127.0.0.1:5432") {
		for _, u := range []string{"postgres", "root"} {
			dsn := postgresURL(u, "127.0.0.1:5432", "test")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := pingPostgres(ctx, dsn)
			cancel()
			if err == nil {
				return dsn, nil
			}
			errs = append(errs, err)
		}
	}
	s, err := shared("postgres", StartPostgres)
	if err != nil {
		return "", errors.Join(append(errs, err)...)
	}
	return postgresURL("postgres", s.Addr, "test"), nil
}

func postgresURL(user, addr, db string) string {
	return "postgres://" + user + "@" + addr + "/" + db + "?sslmode=disable"
}

// pingPostgres connects to dsn. When only the database is missing, it
// creates it through the maintenance database "postgres".
func pingPostgres(ctx context.Context, dsn string) error {
	c, err := pgconn.Connect(ctx, dsn)
	if err == nil {
		return c.Close(ctx)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "3D000" { // invalid_catalog_name
		return err
	}
	cfg, perr := pgconn.ParseConfig(dsn)
	if perr != nil {
		return perr
	}
	db := cfg.Database
	cfg.Database = "postgres"
	m, merr := pgconn.ConnectConfig(ctx, cfg)
	if merr != nil {
		return errors.Join(err, merr)
	}
	defer m.Close(ctx)
	if _, err := m.Exec(ctx, `CREATE DATABASE "`+db+`"`).ReadAll(); err != nil {
		return err
	}
	return nil
}

// StartPostgres initialises a cluster in dir and starts postgres on a free
// port, with durability off (tests do not survive crashes anyway), trust
// authentication for user postgres and a database named test. PostgreSQL
// refuses to run as root; under root, the server runs as the system user
// postgres, dir is given to that user, and the directories between dir and
// the system's temporary directory (a test's private t.TempDir) are made
// traversable by others. It returns once the server accepts sessions, not
// merely connections, or fails after 30 s.
func StartPostgres(dir string) (*Server, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	var prefix []string // runs a command as the postgres user when we are root
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		if err := traversable(dir); err != nil {
			return nil, err
		}
		setpriv, err := lookPath("setpriv", "/usr/bin/setpriv")
		if err != nil {
			return nil, err
		}
		prefix = []string{setpriv, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--init-groups", "--pdeathsig=KILL", "--"}
	}
	data := filepath.Join(dir, "data")
	initdb := append(prefix[:len(prefix):len(prefix)], filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	if out, err := exec.Command(initdb[0], initdb[1:]...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, tail(out))
	}
	server := append(prefix[:len(prefix):len(prefix)], filepath.Join(bin, "postgres"))
	const readyWithin = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	s, err := startOnFreePort(dir, readyWithin, server[0], func(port int) []string {
		return append(server[1:len(server):len(server)],
			"-D", data, "-p", itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_connections=200")
	})
	if err != nil {
		return nil, err
	}
	if err := awaitPostgres(ctx, postgresURL("postgres", s.Addr, "test"), s.done); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// awaitPostgres pings dsn until the server accepts the connection. The
// postmaster listens before it accepts sessions: until crash recovery or
// startup ends it answers every connection with SQLSTATE 57P03, which
// [postgresNotReady] recognises; those answers are retried until ctx ends
// or exited closes (the server process is gone). Any other error is final.
func awaitPostgres(ctx context.Context, dsn string, exited <-chan struct{}) error {
	for {
		err := pingPostgres(ctx, dsn)
		if err == nil || !postgresNotReady(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres still not accepting connections: %w", errors.Join(ctx.Err(), err))
		case <-exited:
			return fmt.Errorf("postgres exited while starting up: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// postgresNotReady reports whether err carries a server answer meaning
// "not ready yet, try again": SQLSTATE 57P03 (cannot_connect_now), which
// PostgreSQL sends while it starts up ("the database system is starting
// up", "… is not yet accepting connections", "… is in recovery mode").
// The decision rests on the SQLSTATE alone, never on message text, and
// looks at every server error in err's tree, so a 57P03 met while
// creating the missing database counts too. Everything else, network
// errors and timeouts included, is not a readiness answer.
func postgresNotReady(err error) bool {
	switch e := err.(type) {
	case *pgconn.PgError:
		return e.Code == "57P03" // cannot_connect_now
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if postgresNotReady(inner) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		return postgresNotReady(e.Unwrap())
	}
	return false
}

// traversable adds search permission for others to dir and to its parents
// up to, not including, os.TempDir().
func traversable(dir string) error {
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Clean(dir); strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
			return err
		}
	}
	return nil
}

// postgresBin returns the bin directory of the newest installed PostgreSQL.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", errors.New("no initdb in /usr/lib/postgresql/*/bin")
	}
	version := func(d string) int { v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return v }
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	return found[0], nil
}
