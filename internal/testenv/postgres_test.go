package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestStartPostgres starts a private server the way PostgresDSN does when
// no server is configured or listening, and runs a query on it.
func TestStartPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	t.Parallel()
	s := Private(t, "PostgreSQL", StartPostgres)
	ctx := context.Background()
	c, err := pgconn.Connect(ctx, postgresURL("postgres", s.Addr, "test"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	res, err := c.Exec(ctx, "SELECT current_database()").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res[0].Rows[0][0]); got != "test" {
		t.Errorf("current_database() = %q, want test", got)
	}
}

// TestPostgresNotReady pins down which connection errors make StartPostgres
// wait (the server's own "not yet" answer, SQLSTATE 57P03, wherever it sits
// in the error tree) and which end the wait at once.
func TestPostgresNotReady(t *testing.T) {
	startingUp := &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"}
	notYet := &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is not yet accepting connections"}
	noDB := &pgconn.PgError{Severity: "FATAL", Code: "3D000", Message: `database "test" does not exist`}
	badUser := &pgconn.PgError{Severity: "FATAL", Code: "28000", Message: `role "nobody" does not exist`}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"starting up", startingUp, true},
		{"not yet accepting connections", notYet, true},
		{"wrapped", fmt.Errorf("connect: %w", startingUp), true},
		{"while creating the missing database", errors.Join(noDB, fmt.Errorf("maintenance: %w", startingUp)), true},
		{"57P03 message text under another code", &pgconn.PgError{Code: "XX000", Message: "the database system is starting up"}, false},
		{"57P03 text without a server error", errors.New("FATAL: the database system is starting up (SQLSTATE 57P03)"), false},
		{"missing database", noDB, false},
		{"unknown role", badUser, false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false},
		{"deadline", context.DeadlineExceeded, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := postgresNotReady(tt.err); got != tt.want {
				t.Errorf("postgresNotReady(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// startingUpServer speaks the PostgreSQL wire protocol on a free port the
// way a postmaster does during startup: the first notReady connections get
// FATAL 57P03, later ones get final (nil: authentication succeeds). After
// each connection it calls served, if not nil, with the number served so
// far. It returns the DSN and that number.
func startingUpServer(t *testing.T, notReady int, final *pgproto3.ErrorResponse, served func(n int)) (string, func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	count := make(chan int, 1)
	count <- 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := <-count
			count <- n + 1
			answerStartup(c, n < notReady, final)
			if served != nil {
				served(n + 1)
			}
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return postgresURL("postgres", l.Addr().String(), "test"), func() int { n := <-count; count <- n; return n }
}

func answerStartup(c net.Conn, starting bool, final *pgproto3.ErrorResponse) {
	defer c.Close()
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return
	}
	switch {
	case starting:
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"})
	case final != nil:
		be.Send(final)
	default:
		be.Send(&pgproto3.AuthenticationOk{})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	}
	if be.Flush() != nil {
		return
	}
	be.Receive() // the client's Terminate, or EOF
}

// TestAwaitPostgres checks the wait loop against a server that answers
// 57P03 a few times before accepting, and one that refuses for good.
func TestAwaitPostgres(t *testing.T) {
	t.Run("waits through starting up", func(t *testing.T) {
		dsn, served := startingUpServer(t, 3, nil, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := awaitPostgres(ctx, dsn, nil); err != nil {
			t.Fatalf("awaitPostgres after three 57P03 answers: %v, want nil", err)
		}
		if got, want := served(), 4; got != want {
			t.Errorf("connections = %d, want %d (three refused, one accepted)", got, want)
		}
	})
	t.Run("other errors end the wait", func(t *testing.T) {
		final := &pgproto3.ErrorResponse{Severity: "FATAL", Code: "28000", Message: `role "postgres" does not exist`}
		dsn, served := startingUpServer(t, 1, final, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		err := awaitPostgres(ctx, dsn, nil)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "28000" {
			t.Fatalf("awaitPostgres = %v, want the 28000 error", err)
		}
		if got, want := served(), 2; got != want {
			t.Errorf("connections = %d, want %d (no retry after a final error)", got, want)
		}
	})
	t.Run("server exits while starting up", func(t *testing.T) {
		dsn, _ := startingUpServer(t, 1<<30, nil, nil)
		exited := make(chan struct{})
		close(exited)
		err := awaitPostgres(t.Context(), dsn, exited)
		if err == nil || !postgresNotReady(err) {
			t.Fatalf("awaitPostgres with the server gone = %v, want the 57P03 error", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// The ready deadline passes while the server still says 57P03.
		dsn, _ := startingUpServer(t, 1<<30, nil, func(n int) {
			if n == 2 {
				cancel()
			}
		})
		err := awaitPostgres(ctx, dsn, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("awaitPostgres with ctx done = %v, want context.Canceled", err)
		}
	})
}
