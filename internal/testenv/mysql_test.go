package testenv

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestStartMariaDB starts a private server the way MySQLDSN does when no
// server is configured or listening, and runs a query on it.
func TestStartMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a MariaDB server")
	}
	t.Parallel()
	s := Private(t, "MariaDB", StartMariaDB)
	cfg, err := mysql.ParseDSN("root@tcp(" + s.Addr + ")/test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	var got string
	if err := db.QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "test" {
		t.Errorf("DATABASE() = %q, want test", got)
	}
}
