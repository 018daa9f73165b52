package redisstore_test

import (
	"context"
	"crypto/rand"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
	"github.com/idemgate/idemgate/store/storetest"
)

// These tests put a Toxiproxy proxy (testenv.NewProxy) between the store's
// client and the real Redis server, and read the records straight from the
// server, around the proxy, to know what the server did.

// parseRecord parses a record's raw value (see record_test.go); its
// pexpireAt is left zero.
func parseRecord(t testing.TB, raw string) record {
	t.Helper()
	m := recordLayout.FindStringSubmatch(raw)
	if m == nil {
		t.Fatalf("record %q does not follow the documented layout", raw)
	}
	var n [3]int64
	for i := range n {
		var err error
		if n[i], err = strconv.ParseInt(m[i+2], 10, 64); err != nil {
			t.Fatalf("record %q: %v", raw, err)
		}
	}
	r := record{state: m[1], fence: n[0], leaseUntil: n[1], expiresAt: n[2], token: m[5]}
	switch r.state {
	case "c", "d": // <n>:<fingerprint><token>
		size, rest, _ := strings.Cut(r.token, ":")
		l, err := strconv.Atoi(size)
		if err != nil || l < 1 || l > len(rest) {
			t.Fatalf("record %q: no fingerprint after a lower-case state", raw)
		}
		r.fp, r.token = rest[:l], rest[l:]
	case "OC", "OD": // <n>:<m>:<fingerprint><origin><token>
		fpSize, rest, _ := strings.Cut(r.token, ":")
		originSize, rest, _ := strings.Cut(rest, ":")
		l, err1 := strconv.Atoi(fpSize)
		o, err2 := strconv.Atoi(originSize)
		if err1 != nil || err2 != nil || l < 0 || o < 1 || l+o > len(rest) {
			t.Fatalf("record %q: no origin after O", raw)
		}
		r.fp, r.origin, r.token = rest[:l], rest[l:l+o], rest[l+o:]
	case "AC", "AD", "AF": // <n>:<m>:<attempts>:<firstFailure>:<k>:<fingerprint><origin><reason><token>
		f := strings.SplitN(r.token, ":", 6)
		var n [5]int64
		for i := range n {
			var err error
			if len(f) < 6 {
				err = strconv.ErrSyntax
			} else {
				n[i], err = strconv.ParseInt(f[i], 10, 64)
			}
			if err != nil || n[i] < 0 {
				t.Fatalf("record %q: no failures after A", raw)
			}
		}
		l, o, k, rest := int(n[0]), int(n[1]), int(n[4]), f[5]
		if n[2] < 1 || l+o+k > len(rest) {
			t.Fatalf("record %q: no failures after A", raw)
		}
		r.attempts, r.firstFailure = int(n[2]), n[3]
		r.fp, r.origin, r.reason, r.token = rest[:l], rest[l:l+o], rest[l+o:l+o+k], rest[l+o+k:]
	}
	return r
}

// unchanged reports whether the record of rkey on the server is still was
// (its expiry in Redis aside).
func unchanged(t *testing.T, admin *redis.Client, rkey string, was record) bool {
	t.Helper()
	now := readRecord(t, admin, rkey)
	now.pexpireAt = was.pexpireAt
	return now == was
}

// faultFixture is a store whose client reaches Redis through a proxy, a
// second store on the same records that does not, and that second client
// to read records on the server.
type faultFixture struct {
	proxy  *testenv.Proxy
	admin  *redis.Client
	prefix string
	s      *redisstore.Store // through the proxy
	other  *redisstore.Store // around it: another client of the same records
	// beforeDial, when set, runs once, just before the proxied client
	// opens its next connection.
	beforeDial atomic.Pointer[func()]
}

// newFaultFixture returns a fixture whose proxied client keeps a single
// connection, so that a retry must dial a new one, and gives up on a
// reply after readTimeout. Its connection is open and the scripts cached
// before it returns: the first bytes a toxic meets are those of the
// test's own call.
func newFaultFixture(t *testing.T, readTimeout time.Duration) *faultFixture {
	f := &faultFixture{admin: newClient(t), prefix: uniquePrefix(t), proxy: testenv.NewProxy(t, testenv.RedisAddr(t))}
	client := redis.NewClient(&redis.Options{
		Addr:        f.proxy.Addr,
		PoolSize:    1,
		ReadTimeout: readTimeout,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if hook := f.beforeDial.Swap(nil); hook != nil {
				(*hook)()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { client.Close() })
	f.s = newStore(t, client, &redisstore.Options{Prefix: f.prefix})
	f.other = newStore(t, f.admin, &redisstore.Options{Prefix: f.prefix})
	if c, err := f.s.Claim(t.Context(), "warm-up", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.Won {
		t.Fatalf("warm-up Claim = %v, %v; want Won", c.Status, err)
	}
	return f
}

// clearOnRedial removes x when the proxied client dials again, after
// reading on the server the record of key as the lost attempt left it.
// The returned channel delivers that raw record.
func (f *faultFixture) clearOnRedial(x *testenv.Toxic, key string) <-chan string {
	seen := make(chan string, 1)
	hook := func() {
		raw, _ := f.admin.Get(context.Background(), f.prefix+key).Result()
		seen <- raw
		x.Remove()
	}
	f.beforeDial.Store(&hook)
	return seen
}

// checkReaffirmed checks that c, the outcome of a retried Claim of key,
// re-affirmed the claim recorded in was, that the record is untouched, and
// that another client meets HeldByOther.
func (f *faultFixture) checkReaffirmed(t *testing.T, c store.Claim, was record) {
	t.Helper()
	if c.Status != store.Won || c.Fence != was.fence || c.Token != was.token {
		t.Errorf("retried Claim = %v fence %d token %q; want Won with the fence %d and token %q the lost attempt wrote (re-affirm, no bump)",
			c.Status, c.Fence, c.Token, was.fence, was.token)
	}
	if !unchanged(t, f.admin, f.prefix+c.Key, was) {
		t.Errorf("record after the retry = %+v, want it untouched: %+v", readRecord(t, f.admin, f.prefix+c.Key), was)
	}
	if o, err := f.other.Claim(t.Context(), c.Key, time.Minute, store.ClaimOptions{}); err != nil || o.Status != store.HeldByOther || o.Fence != was.fence {
		t.Errorf("another client's Claim = %v fence %d, %v; want HeldByOther at fence %d: no second owner", o.Status, o.Fence, err, was.fence)
	}
}

// TestNetFaultLostClaimReply loses the reply of a Claim that Redis applied,
// then retries it. The retry must re-affirm the claim (Won, same fence, the
// record untouched), while any other Claim meets HeldByOther: the lost reply
// never makes a second owner.
//
// go-redis retries a command (MaxRetries, default 3) on a new connection
// with the same arguments, hence the same claim token, when the reply
// timed out and when the connection ended, even by a reset: a reset seen
// while reading reaches go-redis as io.EOF, which it retries.
func TestNetFaultLostClaimReply(t *testing.T) {
	// The proxy resets the connection instead of passing the reply on; it
	// lets the retry through.
	t.Run("reply-reset/go-redis-retries", func(t *testing.T) {
		f := newFaultFixture(t, 0)
		seen := f.clearOnRedial(f.proxy.LimitData(t, testenv.Downstream, 0), "k")
		c, err := f.s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
		checkRetried(t, f, seen, c, err)
	})

	// The proxy holds the reply back until the client gives up on it.
	t.Run("reply-timed-out/go-redis-retries", func(t *testing.T) {
		f := newFaultFixture(t, 300*time.Millisecond)
		seen := f.clearOnRedial(f.proxy.Timeout(t, testenv.Downstream, 0), "k")
		c, err := f.s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
		checkRetried(t, f, seen, c, err)
	})

	// Every attempt of go-redis loses its reply, so Claim fails; each
	// attempt re-affirmed the first, so the fence is still the first's. The caller
	// who fixed the token with store.ClaimOptions.Token retries safely.
	t.Run("reply-lost-every-attempt/caller-retries-with-token", func(t *testing.T) {
		f := newFaultFixture(t, 0)
		token := rand.Text()
		opts := store.ClaimOptions{Token: token}
		lost := f.proxy.LimitData(t, testenv.Downstream, 0)
		if c, err := f.s.Claim(t.Context(), "k", time.Minute, opts); err == nil {
			t.Fatalf("Claim whose every reply was lost = %v, nil; want an error", c.Status)
		}
		rec := readRecord(t, f.admin, f.prefix+"k")
		if rec.state != "C" || rec.fence <= 0 || rec.token != token {
			t.Fatalf("record after the lost replies = %+v, want CLAIMED with the caller's token %q", rec, token)
		}
		lost.Remove()
		// Without the token, the caller's own lost claim is a stranger's.
		if c, err := f.s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.HeldByOther || c.Fence != rec.fence {
			t.Errorf("retry with a fresh token = %v fence %d, %v; want HeldByOther at fence %d", c.Status, c.Fence, err, rec.fence)
		}
		c, err := f.s.Claim(t.Context(), "k", time.Minute, opts)
		if err != nil {
			t.Fatalf("retry with the same token: %v", err)
		}
		f.checkReaffirmed(t, c, rec)
	})
}

// TestNetFaultLostFreeReply loses the reply of a Retry (and of a Forget)
// that Redis applied; go-redis runs the script again, which must find the
// record freed by this very call and report true, so that idemgate retry
// does not say "not FAILED any more" of a key it retried.
func TestNetFaultLostFreeReply(t *testing.T) {
	for _, op := range []string{"Retry", "Forget"} {
		t.Run(op, func(t *testing.T) {
			f := newFaultFixture(t, 0)
			c, err := f.s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
			if err != nil || c.Status != store.Won {
				t.Fatalf("Claim = %v, %v; want Won", c.Status, err)
			}
			if _, failed, err := f.s.Fail(t.Context(), c, store.Failure{Reason: "poison", Final: true}); !failed || err != nil {
				t.Fatalf("Fail = %v, %v; want FAILED", failed, err)
			}
			seen := f.clearOnRedial(f.proxy.LimitData(t, testenv.Downstream, 0), "k")
			free := f.s.Retry
			if op == "Forget" {
				free = f.s.Forget
			}
			ok, err := free(t.Context(), "k")
			select {
			case applied := <-seen:
				if r := parseRecord(t, applied); r.state == "AF" {
					t.Fatalf("record before go-redis's retry = %q, want it freed: the lost attempt must have been applied", applied)
				}
			default:
				t.Fatalf("%s = %v, %v without dialling again: the reply was not lost, or go-redis did not retry", op, ok, err)
			}
			if !ok || err != nil {
				t.Errorf("%s retried by go-redis after its reply was lost = %v, %v; want true: this call freed the record", op, ok, err)
			}
			if c2, err := f.other.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{}); err != nil || c2.Status != store.Won || c2.Fence <= c.Fence {
				t.Errorf("Claim after the %s = %v fence %d, %v; want Won above fence %d", op, c2.Status, c2.Fence, err, c.Fence)
			}
		})
	}
}

// checkRetried checks a Claim that go-redis retried after losing the reply
// of its first attempt: seen delivers the record as that attempt left it.
func checkRetried(t *testing.T, f *faultFixture, seen <-chan string, c store.Claim, err error) {
	t.Helper()
	var applied string
	select {
	case applied = <-seen:
	default:
		t.Fatalf("Claim = %v, %v without dialling again: the reply was not lost, or go-redis did not retry", c.Status, err)
	}
	if err != nil {
		t.Fatalf("retried Claim = %v; want go-redis's retry to re-affirm the claim", err)
	}
	rec := parseRecord(t, applied)
	if rec.state != "C" || rec.fence <= 0 {
		t.Fatalf("record before the retry = %q, want CLAIMED: the lost attempt must have been applied", applied)
	}
	f.checkReaffirmed(t, c, rec)
}

// TestNetFaultLatency runs the conformance suite through a proxy that
// delays every byte by 250µs each way, a round trip within a cloud zone:
// the rules hold when replies are slow, not only when they are instant.
func TestNetFaultLatency(t *testing.T) {
	p := testenv.NewProxy(t, testenv.RedisAddr(t))
	p.Latency(t, testenv.Upstream, 250*time.Microsecond)
	p.Latency(t, testenv.Downstream, 250*time.Microsecond)
	client := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { client.Close() })
	trackKeys(t, client)
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			return newStore(t, client, &redisstore.Options{Prefix: uniquePrefix(t), TTL: s.TTL})
		},
		RealClock: true,
		Tick:      tick,
		Delete:    deleteRecord,
	})
}
