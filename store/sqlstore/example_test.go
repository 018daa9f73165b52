package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // driver "sqlite"

	"github.com/idemgate/idemgate/store/sqlstore"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "idemgate-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// SQLite as the package documentation advises: WAL, a busy timeout and
	// one connection. With PostgreSQL, open "pgx" and pass
	// sqlstore.PostgreSQL; with MariaDB, "mysql" and sqlstore.MariaDB.
	db, err := sql.Open("sqlite", filepath.Join(dir, "idemgate.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	s, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{
		Table: "idemgate_records",
		TTL:   24 * time.Hour, // suppress duplicates for a day
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := s.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}

	c, err := s.Claim(ctx, "order-42", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Status, c.Fence)
	// … run the side effect while holding the claim, then:
	done, err := s.Complete(ctx, c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done)

	dup, err := s.Claim(ctx, "order-42", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(dup.Status, dup.Fence)
	// Output:
	// won 1
	// true
	// already_done 1
}

// A purge job, run in a goroutine of the service for as long as ctx lives.
// Expired records stay in the table, behaving as absent, until a purge
// deletes them. Every instance may run one: concurrent purges are safe.
func ExampleStore_PurgeExpired() {
	var s *sqlstore.Store                   // from sqlstore.New
	ctx := context.Background()             // the service's lifetime
	tick := time.NewTicker(5 * time.Minute) // a fraction of the ttl
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := s.PurgeExpired(ctx, 1000)
		if err != nil {
			log.Printf("idemgate purge: %v", err)
			continue
		}
		log.Printf("idemgate purge: %d expired records deleted", n)
	}
}
