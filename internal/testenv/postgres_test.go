package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
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
