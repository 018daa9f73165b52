package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
	"github.com/idemgate/idemgate/store/storetest"
)

// These tests put a Toxiproxy proxy (testenv.NewProxy) between the store's
// driver and the real database server, and read the records straight from
// the server, around the proxy, to know what the server did.

// faultBackends are the server backends the network tests run on (SQLite
// has no network).
var faultBackends = []backend{postgresBackend, mariadbBackend}

// proxied is a connector of backend b whose connections go through a new
// proxy.
type proxied struct {
	proxy *testenv.Proxy
	c     driver.Connector
}

func newProxied(t testing.TB, b backend) *proxied {
	t.Helper()
	pr := &proxied{}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, pr.proxy.Addr)
	}
	switch b.dialect {
	case sqlstore.PostgreSQL:
		cfg, err := pgx.ParseConfig(testenv.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		pr.proxy = testenv.NewProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
		cfg.Fallbacks = nil
		cfg.DialFunc = dial
		// pgx's database/sql driver pings a connection idle for a second
		// before reusing it; on a loaded machine that ping, not the
		// statement under test, would meet the toxic.
		noPing := stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false })
		pr.c = stdlib.GetConnector(*cfg, noPing)
	case sqlstore.MariaDB, sqlstore.MySQL:
		dsn := testenv.MySQLDSN(t)
		if strings.Contains(dsn, "?") {
			dsn += "&interpolateParams=true"
		} else {
			dsn += "?interpolateParams=true"
		}
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		pr.proxy = testenv.NewProxy(t, cfg.Addr)
		cfg.DialFunc = dial
		if pr.c, err = mysql.NewConnector(cfg); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no network for %s", b.name)
	}
	return pr
}

// sqlRecord is a record as the server holds it.
type sqlRecord struct {
	state      int // 1 CLAIMED, 2 DONE
	fence      int64
	token      string
	leaseUntil int64
}

// readSQLRecord reads key's record in table through db, which does not go
// through the proxy.
func readSQLRecord(t *testing.T, db *sql.DB, table, key string) sqlRecord {
	t.Helper()
	var r sqlRecord
	// The key is the test's own constant: no quoting issue.
	err := db.QueryRowContext(t.Context(), "SELECT state, fence, token, lease_until FROM "+table+" WHERE key_text = '"+key+"'").
		Scan(&r.state, &r.fence, &r.token, &r.leaseUntil)
	if err != nil {
		t.Fatalf("reading %q in %s on the server: %v", key, table, err)
	}
	return r
}

// TestNetFaultLostClaimReply loses the reply of a Claim that the database
// committed. Neither the drivers (pgx, go-sql-driver/mysql) nor the store
// run a statement again once it was sent (database/sql may move a
// statement that never left to a new connection, which the proxy also
// cuts): the Claim fails, and the caller retries. A caller that fixed the claim token with store.ClaimOptions.Token
// gets its claim re-affirmed (Won, same fence, the record untouched), and
// any other Claim meets HeldByOther: the lost reply never makes a second
// owner.
func TestNetFaultLostClaimReply(t *testing.T) {
	for _, b := range faultBackends {
		t.Run(b.name+"/reply-reset/caller-retries-with-token", func(t *testing.T) {
			t.Parallel()
			direct := b.open(t, 2)
			table := uniqueTable()
			other := b.store(t, direct, &sqlstore.Options{Table: table}) // creates the table
			pr := newProxied(t, b)
			s, err := sqlstore.New(openDB(t, pr.c, 1), b.dialect, &sqlstore.Options{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			// The one connection is open before the toxic: the first bytes
			// it meets are the Claim's reply.
			if c, err := s.Claim(ctx, "warm-up", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.Won {
				t.Fatalf("warm-up Claim = %v, %v; want Won", c.Status, err)
			}

			token := rand.Text()
			opts := store.ClaimOptions{Token: token}
			lost := pr.proxy.LimitData(t, testenv.Downstream, 0)
			if c, err := s.Claim(ctx, "k", time.Minute, opts); err == nil {
				t.Fatalf("Claim whose reply was reset = %v, nil; want an error", c.Status)
			}
			rec := readSQLRecord(t, direct, table, "k")
			if rec.state != 1 || rec.fence <= 0 || rec.token != token {
				t.Fatalf("record after the lost reply = %+v, want CLAIMED with the caller's token %q", rec, token)
			}
			lost.Remove()

			// Without the token, the caller's own lost claim is a stranger's.
			if c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.HeldByOther || c.Fence != rec.fence {
				t.Errorf("retry with a fresh token = %v fence %d, %v; want HeldByOther at fence %d", c.Status, c.Fence, err, rec.fence)
			}
			if o, err := other.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || o.Status != store.HeldByOther || o.Fence != rec.fence {
				t.Errorf("another client's Claim = %v fence %d, %v; want HeldByOther at fence %d: no second owner", o.Status, o.Fence, err, rec.fence)
			}
			c, err := s.Claim(ctx, "k", time.Minute, opts)
			if err != nil || c.Status != store.Won || c.Fence != rec.fence || c.Token != token {
				t.Errorf("retry with the same token = %v fence %d token %q, %v; want Won at fence %d with token %q (re-affirm, no bump)",
					c.Status, c.Fence, c.Token, err, rec.fence, token)
			}
			if now := readSQLRecord(t, direct, table, "k"); now != rec {
				t.Errorf("record after the retry = %+v, want it untouched: %+v", now, rec)
			}
		})
	}
}

// TestNetFaultLatency runs the conformance suite through a proxy that
// delays every byte by 250µs each way, a round trip within a cloud zone:
// the rules hold when replies are slow, not only when they are instant.
func TestNetFaultLatency(t *testing.T) {
	for _, b := range faultBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			pr := newProxied(t, b)
			pr.proxy.Latency(t, testenv.Upstream, 250*time.Microsecond)
			pr.proxy.Latency(t, testenv.Downstream, 250*time.Microsecond)
			db := openDB(t, pr.c, 16)
			storetest.Run(t, storetest.Config{
				NewStore: func(t testing.TB, s storetest.Setup) store.Store {
					return b.store(t, db, &sqlstore.Options{TTL: s.TTL})
				},
				RealClock: true,
				Tick:      tick,
				InTx:      inSQLTx(db),
				Delete:    purge,
			})
		})
	}
}
