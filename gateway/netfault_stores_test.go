package gateway_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// proxiedStore is a real store whose client reaches its server through a
// Toxiproxy proxy, and a way to read its records on the server around the
// proxy.
type proxiedStore struct {
	proxy *testenv.Proxy
	st    store.Store
	// record returns key's state ("C" claimed, "D" done) and fence as the
	// server holds them.
	record func(t *testing.T, key string) (state string, fence int64)
}

// proxiedStores open each store with a network between it and its server.
var proxiedStores = map[string]func(t *testing.T) proxiedStore{
	"redis": func(t *testing.T) proxiedStore {
		p := testenv.NewProxy(t, testenv.RedisAddr(t))
		client := redis.NewClient(&redis.Options{Addr: p.Addr})
		t.Cleanup(func() { client.Close() })
		admin := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		t.Cleanup(func() { admin.Close() })
		prefix := "idemgate-netfault-" + rand.Text() + ":"
		st, err := redisstore.New(t.Context(), client, &redisstore.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return proxiedStore{proxy: p, st: st, record: func(t *testing.T, key string) (string, int64) {
			t.Helper()
			raw, err := admin.Get(context.Background(), prefix+key).Result()
			if err != nil {
				t.Fatalf("reading %s on the server: %v", key, err)
			}
			t.Cleanup(func() { admin.Unlink(context.Background(), prefix+key) })
			head, _, _ := strings.Cut(raw, ":")
			fence, err := strconv.ParseInt(head[1:], 10, 64)
			if err != nil {
				t.Fatalf("record %q: %v", raw, err)
			}
			return head[:1], fence
		}}
	},
	"postgres": func(t *testing.T) proxiedStore {
		cfg, err := pgx.ParseConfig(testenv.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		upstream := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
		p := testenv.NewProxy(t, upstream)
		direct := sql.OpenDB(stdlib.GetConnector(*cfg))
		t.Cleanup(func() { direct.Close() })
		host, port, _ := net.SplitHostPort(p.Addr)
		n, _ := strconv.Atoi(port)
		cfg.Host, cfg.Port, cfg.Fallbacks = host, uint16(n), nil
		// database/sql's pgx driver pings a connection that has been idle
		// for a second before reusing it; on a loaded machine that ping,
		// not the Complete, would be the first bytes to meet the toxic.
		noPing := stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false })
		return sqlProxiedStore(t, p, sqlstore.PostgreSQL, direct, sql.OpenDB(stdlib.GetConnector(*cfg, noPing)))
	},
	"mariadb": func(t *testing.T) proxiedStore {
		cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.InterpolateParams = true
		p := testenv.NewProxy(t, cfg.Addr)
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		direct := sql.OpenDB(c)
		t.Cleanup(func() { direct.Close() })
		cfg = cfg.Clone()
		cfg.Addr = p.Addr
		if c, err = mysql.NewConnector(cfg); err != nil {
			t.Fatal(err)
		}
		return sqlProxiedStore(t, p, sqlstore.MariaDB, direct, sql.OpenDB(c))
	},
}

// sqlProxiedStore creates a fresh table through direct, dropped when t
// ends, and returns a store on it through proxied.
func sqlProxiedStore(t *testing.T, p *testenv.Proxy, d sqlstore.Dialect, direct, proxied *sql.DB) proxiedStore {
	t.Helper()
	t.Cleanup(func() { proxied.Close() })
	proxied.SetMaxOpenConns(1) // the connection the warm-up prepared
	table := "igt_netfault_" + strings.ToLower(rand.Text()[:12])
	setup, err := sqlstore.New(direct, d, &sqlstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.ExecContext(context.Background(), "DROP TABLE "+table) })
	st, err := sqlstore.New(proxied, d, &sqlstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return proxiedStore{proxy: p, st: st, record: func(t *testing.T, key string) (string, int64) {
		t.Helper()
		var state int
		var fence int64
		// The key is the test's own constant: no quoting issue.
		err := direct.QueryRowContext(t.Context(), "SELECT state, fence FROM "+table+" WHERE key_text = '"+key+"'").Scan(&state, &fence)
		if err != nil {
			t.Fatalf("reading %s on the server: %v", key, err)
		}
		return map[int]string{1: "C", 2: "D"}[state], fence
	}}
}

// netLease is the lease of the gateways below: a redelivery after a lost
// Complete waits it out.
const netLease = time.Second

// TestNetFaultCompleteReset resets the store connection when the gateway
// sends Complete, after the body ran. The gateway cannot record the work
// as done; it logs that at ERROR and returns nil, so the delivery is acked
// (SPEC section 3: re-raising would repeat an irreversible side effect).
// The redelivery of the same key then never runs the body while the first
// claim's lease is live:
//
//   - request-reset: the proxy drops the Complete and resets the
//     connection; the record stays CLAIMED. A redelivery during the lease
//     gets ErrInProgress; the body runs again only once the lease is over
//     on the server's clock, at fence 2 (the logged risk).
//   - reply-reset: the server applies the Complete and the proxy resets
//     the connection instead of passing the reply on; the record is DONE.
//     The redelivery is a duplicate and the body never runs again.
func TestNetFaultCompleteReset(t *testing.T) {
	for name, open := range proxiedStores {
		for _, cut := range []struct {
			name string
			add  func(t *testing.T, p *testenv.Proxy) *testenv.Toxic
			// done says whether the Complete reaches the server.
			done bool
		}{
			{"request-reset", func(t *testing.T, p *testenv.Proxy) *testenv.Toxic { return p.ResetPeer(t, testenv.Upstream, 0) }, false},
			{"reply-reset", func(t *testing.T, p *testenv.Proxy) *testenv.Toxic { return p.LimitData(t, testenv.Downstream, 0) }, true},
		} {
			t.Run(name+"/"+cut.name, func(t *testing.T) {
				t.Parallel()
				ps := open(t)
				l := &logs{}
				// No renewal: its Extend calls would share the wire with the
				// Complete the test cuts, and move the lease it waits out.
				// The toxic stays until Lock returns, so every retry of the
				// Complete within the SettleTimeout meets it too.
				g, err := gateway.New(ps.st, &gateway.Options{Lease: netLease, NoRenew: true, SettleTimeout: time.Second, Logger: l.logger()})
				if err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				// Open the connection and prepare every statement first
				// (pgx prepares a statement on first use, a round trip of
				// its own), so that the next bytes after the body are the
				// Complete itself.
				var warm atomic.Int32
				if err := g.Lock(ctx, "warm-up", counter(&warm)); err != nil || warm.Load() != 1 {
					t.Fatalf("warm-up Lock = %v (ran %d), want nil and one run", err, warm.Load())
				}
				var runs atomic.Int32
				var first store.Claim
				var toxic *testenv.Toxic
				err = g.Lock(ctx, "k", func(ctx context.Context) error {
					runs.Add(1)
					first, _ = gateway.ClaimFromContext(ctx)
					toxic = cut.add(t, ps.proxy) // the next bytes on the wire are the Complete's
					return nil
				})
				if err != nil {
					t.Fatalf("Lock whose Complete was cut = %v, want nil: the body succeeded, so the delivery is acked", err)
				}
				lines := l.lines(t, "ERROR")
				if len(lines) != 1 || lines[0]["outcome"] != string(gateway.OutcomeCompleteError) || lines[0]["fence"] != float64(first.Fence) ||
					!strings.Contains(lines[0]["msg"].(string), "not recorded as done") {
					t.Fatalf("ERROR log lines = %v, want one %q line for fence %d", lines, gateway.OutcomeCompleteError, first.Fence)
				}
				toxic.Remove()

				state, fence := ps.record(t, "k")
				if want := map[bool]string{true: "D", false: "C"}[cut.done]; state != want || fence != first.Fence {
					t.Fatalf("record on the server = %s at fence %d, want %s at fence %d", state, fence, want, first.Fence)
				}
				if cut.done {
					if err := g.Lock(ctx, "k", counter(&runs)); !errors.Is(err, gateway.ErrDuplicate) || runs.Load() != 1 {
						t.Errorf("redelivery after a Complete whose reply was lost = %v (body ran %d times), want ErrDuplicate and one run", err, runs.Load())
					}
					return
				}

				// The record is CLAIMED: redeliveries meet the first claim
				// until its lease is over, then one of them runs the body.
				var second store.Claim
				for runs.Load() == 1 {
					err := g.Lock(ctx, "k", func(ctx context.Context) error {
						runs.Add(1)
						second, _ = gateway.ClaimFromContext(ctx)
						return nil
					})
					var ip *gateway.InProgressError
					switch {
					case err == nil:
					case errors.As(err, &ip) && ip.LeaseUntil.Equal(first.LeaseUntil):
						waitUntil(ctx, ip.LeaseUntil)
					default:
						t.Fatalf("redelivery during the first claim's lease = %v, want ErrInProgress until %v", err, first.LeaseUntil)
					}
				}
				// The store's clock at the second Claim: its lease end minus
				// the lease.
				if at := second.LeaseUntil.Add(-netLease); at.Before(first.LeaseUntil) || second.Fence <= first.Fence {
					t.Errorf("second run at %v with fence %d; want it at or after the first lease's end %v, with a fence above %d",
						at, second.Fence, first.LeaseUntil, first.Fence)
				}
			})
		}
	}
}

// waitUntil returns at instant at (on this machine's clock, which is the
// servers' clock too) or when ctx ends.
func waitUntil(ctx context.Context, at time.Time) {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
