package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLDSN returns the DSN (github.com/go-sql-driver/mysql syntax) of a
// MariaDB or MySQL database for tests: $MYSQL_DSN; else database test on
// 127.0.0.1:3306 as root without a password, if a server listens there;
// else a mariadbd started on a free port. Tests must isolate themselves
// with unique table names.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("MYSQL_DSN"); d != "" {
		return d
	}
	dsn, err := mysqlDSN()
	if err != nil {
		Unavailable(t, "MariaDB/MySQL: set MYSQL_DSN or install mariadb-server (apt install mariadb-server): %v", err)
	}
	return dsn
}

// mysqlDSN finds a server once per test binary, as postgresDSN.
var mysqlDSN = sync.OnceValues(findMySQL)

func findMySQL() (string, error) {
	var errs []error
	if Listening("127.0.0.1:3306") {
		dsn := "root@tcp(127.0.0.1:3306)/test"
		err := pingMySQL(dsn)
		if err == nil {
			return dsn, nil
		}
		errs = append(errs, err)
	}
	s, err := shared("mariadb", StartMariaDB)
	if err != nil {
		return "", errors.Join(append(errs, err)...)
	}
	return "root@tcp(" + s.Addr + ")/test", nil
}

// pingMySQL connects to dsn, creating its database if only that is missing.
func pingMySQL(dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = pingMySQLConfig(ctx, cfg)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1049 { // unknown database
		return err
	}
	name := cfg.DBName
	cfg.DBName = ""
	c, cerr := mysql.NewConnector(cfg)
	if cerr != nil {
		return cerr
	}
	db := sql.OpenDB(c)
	defer db.Close()
	if _, cerr := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); cerr != nil {
		return errors.Join(err, cerr)
	}
	return nil
}

func pingMySQLConfig(ctx context.Context, cfg *mysql.Config) error {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	return db.PingContext(ctx)
}

// StartMariaDB creates a data directory in dir with mariadb-install-db and
// starts mariadbd on a free port, without grant tables (any user, no
// password), binary log or durable flushes, with a database named test.
func StartMariaDB(dir string) (*Server, error) {
	install, err := lookPath("mariadb-install-db", "/usr/bin/mariadb-install-db", "/usr/bin/mysql_install_db")
	if err != nil {
		return nil, err
	}
	server, err := lookPath("mariadbd", "/usr/sbin/mariadbd", "/usr/sbin/mysqld")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	var asUser []string // mariadbd refuses to run as root unless told so
	if os.Geteuid() == 0 {
		asUser = []string{"--user=root"}
	}
	args := append([]string{"--no-defaults", "--datadir=" + data, "--skip-test-db"}, asUser...)
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %v: %s", err, tail(out))
	}
	s, err := startOnFreePort(dir, time.Minute, server, func(port int) []string {
		return append([]string{
			"--no-defaults", "--datadir=" + data, "--port=" + itoa(port), "--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--skip-grant-tables", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0",
		}, asUser...)
	})
	if err != nil {
		return nil, err
	}
	if err := pingMySQL("root@tcp(" + s.Addr + ")/test"); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}
