package gateway_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// Renewal on real stores, whose clocks are their servers': work that lasts
// several leases keeps its key, and completes.
func TestRenewalOnRealStores(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) store.Store{
		"redis": func(t *testing.T) store.Store {
			client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
			t.Cleanup(func() { client.Close() })
			st, err := redisstore.New(t.Context(), client, &redisstore.Options{Prefix: "idemgate-renew-" + store.ClaimOptions{}.ClaimToken() + ":"})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"sqlite": func(t *testing.T) store.Store {
			db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "r.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			t.Cleanup(func() { db.Close() })
			st, err := sqlstore.New(db, sqlstore.SQLite, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.CreateTable(t.Context()); err != nil {
				t.Fatal(err)
			}
			return st
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			// A real clock: the lease leaves renewals (every third of it)
			// room for a loaded machine and a one-connection SQLite.
			const lease = time.Second
			g, err := gateway.New(st, &gateway.Options{Lease: lease, Logger: (&logs{}).logger()})
			if err != nil {
				t.Fatal(err)
			}
			checkLongWork(t, g, "long-work", 3*lease, lease/2)
		})
	}
}
