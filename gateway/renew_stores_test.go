package gateway_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
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
			st, err := redisstore.New(client, &redisstore.Options{Prefix: "idemgate-renew-" + store.ClaimToken(t.Context()) + ":"})
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
			const lease = 300 * time.Millisecond
			g, err := gateway.New(st, &gateway.Options{Lease: lease, Logger: (&logs{}).logger()})
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			err = g.Lock(t.Context(), "long-work", func(ctx context.Context) error {
				runs.Add(1)
				end := time.After(4 * lease) // work that outlives four leases
				tick := time.NewTicker(lease / 2)
				defer tick.Stop()
				for {
					select {
					case <-end:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					case <-tick.C:
						if err := g.Lock(context.Background(), "long-work", counter(&runs)); !errors.Is(err, gateway.ErrInProgress) {
							t.Errorf("a redelivery during renewed work = %v, want ErrInProgress", err)
						}
					}
				}
			})
			if err != nil || runs.Load() != 1 {
				t.Fatalf("renewed work = %v (ran %d), want nil and one run", err, runs.Load())
			}
			if err := g.Lock(t.Context(), "long-work", counter(&runs)); !errors.Is(err, gateway.ErrDuplicate) {
				t.Fatalf("after the work = %v, want ErrDuplicate", err)
			}
		})
	}
}
