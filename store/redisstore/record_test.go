package redisstore_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

// record is a record read back in the layout doc.go documents.
type record struct {
	state                 string // as stored: lower case when a fingerprint follows
	fence                 int64
	leaseUntil, expiresAt int64 // unix ms on the server's clock
	fp                    string
	token                 string
	pexpireAt             int64 // when Redis deletes the key, unix ms
}

var recordLayout = regexp.MustCompile(`(?s)^([CDcd])(\d+):(\d+):(\d+):(.*)$`)

// readRecord reads and parses the raw key of a record.
func readRecord(t testing.TB, client redis.UniversalClient, rawKey string) record {
	t.Helper()
	ctx := t.Context()
	v, err := client.Get(ctx, rawKey).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", rawKey, err)
	}
	r := parseRecord(t, v)
	at, err := client.PExpireTime(ctx, rawKey).Result()
	if err != nil {
		t.Fatalf("PEXPIRETIME %s: %v", rawKey, err)
	}
	r.pexpireAt = at.Milliseconds()
	return r
}

// serverMillis returns the server's clock (TIME) in unix milliseconds.
func serverMillis(t testing.TB, client redis.UniversalClient) int64 {
	t.Helper()
	now, err := client.Time(t.Context()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now.UnixMilli()
}

// TestRecordLayout pins the stored form of a record through its life, and
// that every instant in it comes from the server's TIME.
func TestRecordLayout(t *testing.T) {
	const (
		ttl   = time.Hour
		lease = time.Minute
	)
	for _, grace := range []time.Duration{0, 10 * time.Minute, -1} {
		wantGrace := grace
		switch {
		case grace == 0:
			wantGrace = ttl // the default
		case grace < 0:
			wantGrace = 0
		}
		t.Run("Grace="+grace.String(), func(t *testing.T) {
			client := newClient(t)
			prefix := uniquePrefix(t)
			s := newStore(t, client, &redisstore.Options{Prefix: prefix, TTL: ttl, Grace: grace})
			ctx := t.Context()
			rawKey := prefix + "order-42"

			before := serverMillis(t, client)
			c, err := s.Claim(ctx, "order-42", lease)
			after := serverMillis(t, client)
			if err != nil || c.Status != store.Won {
				t.Fatalf("Claim = %v, %v; want Won", c.Status, err)
			}
			r := readRecord(t, client, rawKey)
			if r.state != "C" || r.fence != c.Fence || r.token != c.Token {
				t.Errorf("claimed record = %+v, want state C, fence %d, token %q", r, c.Fence, c.Token)
			}
			if lo, hi := before*1000, after*1000; r.fence < lo || r.fence > hi {
				t.Errorf("a new record's fence %d not in server TIME in microseconds [%d, %d]", r.fence, lo, hi)
			}
			if r.leaseUntil != c.LeaseUntil.UnixMilli() {
				t.Errorf("stored leaseUntil %d, Claim returned %d", r.leaseUntil, c.LeaseUntil.UnixMilli())
			}
			if lo, hi := before+lease.Milliseconds(), after+lease.Milliseconds(); r.leaseUntil < lo || r.leaseUntil > hi {
				t.Errorf("leaseUntil %d not in server TIME + lease [%d, %d]: the lease must come from the server's clock", r.leaseUntil, lo, hi)
			}
			if r.expiresAt != r.leaseUntil+ttl.Milliseconds() {
				t.Errorf("claimed expiresAt = %d, want leaseUntil + ttl = %d", r.expiresAt, r.leaseUntil+ttl.Milliseconds())
			}
			if r.pexpireAt != r.expiresAt+wantGrace.Milliseconds() {
				t.Errorf("PEXPIRETIME = %d, want expiresAt + grace = %d", r.pexpireAt, r.expiresAt+wantGrace.Milliseconds())
			}

			before = serverMillis(t, client)
			if ok, err := s.Complete(ctx, c); !ok || err != nil {
				t.Fatalf("Complete = %v, %v; want true", ok, err)
			}
			after = serverMillis(t, client)
			r = readRecord(t, client, rawKey)
			if r.state != "D" || r.fence != c.Fence || r.token != "" {
				t.Errorf("completed record = %+v, want state D, fence %d, no token", r, c.Fence)
			}
			if lo, hi := before+ttl.Milliseconds(), after+ttl.Milliseconds(); r.expiresAt < lo || r.expiresAt > hi {
				t.Errorf("completed expiresAt %d not in server TIME + ttl [%d, %d]", r.expiresAt, lo, hi)
			}
			if r.pexpireAt != r.expiresAt+wantGrace.Milliseconds() {
				t.Errorf("PEXPIRETIME = %d, want expiresAt + grace = %d", r.pexpireAt, r.expiresAt+wantGrace.Milliseconds())
			}
			if n, err := client.MemoryUsage(ctx, rawKey).Result(); err == nil {
				t.Logf("a DONE record with a %d-byte key uses %d bytes (MEMORY USAGE)", len(rawKey), n)
			}
		})
	}
}

// TestReleaseLayout checks that Release raises the fence, ends the lease on
// the server's clock, forgets the token and leaves an expiry that is a ttl
// away or more alone.
func TestReleaseLayout(t *testing.T) {
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix})
	ctx := t.Context()
	c, err := s.Claim(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	was := readRecord(t, client, prefix+"k")
	before := serverMillis(t, client)
	if err := s.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	after := serverMillis(t, client)
	r := readRecord(t, client, prefix+"k")
	if r.state != "C" || r.fence <= c.Fence || r.fence < before*1000 || r.token != "" {
		t.Errorf("released record = %+v, want state C, a fence above %d and at least the server's microseconds %d, no token", r, c.Fence, before*1000)
	}
	if r.leaseUntil < before || r.leaseUntil > after {
		t.Errorf("released leaseUntil %d, want the server's now in [%d, %d]", r.leaseUntil, before, after)
	}
	if r.expiresAt != was.expiresAt || r.pexpireAt != was.pexpireAt {
		t.Errorf("Release moved the expiry: %+v, was %+v", r, was)
	}
	// A retry of the released Claim with its own token must not re-affirm the
	// abandoned claim: it reclaims with a fresh lease and a new fence.
	again, err := s.Claim(store.WithClaimToken(ctx, c.Token), "k", time.Minute)
	if err != nil || again.Status != store.Won || again.Fence <= r.fence || !again.LeaseUntil.After(c.LeaseUntil.Add(-time.Second)) {
		t.Errorf("Claim with the released token = %+v, %v; want Won above fence %d with a fresh lease", again, err, r.fence)
	}
}

// TestReleaseNearExpiryKeepsTheRecord: a Release late in a record's life
// (its lease lapsed long ago) moves the expiry to a ttl from now, so Redis
// deletes the record no sooner than a ttl after the fence it raised.
func TestReleaseNearExpiryKeepsTheRecord(t *testing.T) {
	const ttl = time.Hour
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix, TTL: ttl, Grace: -1})
	ctx := t.Context()
	now := serverMillis(t, client)
	// A claim whose lease ended long ago and whose record expires in a minute.
	token := "late"
	if err := client.Set(ctx, prefix+"k", fmt.Sprintf("C7:%d:%d:%s", now-ttl.Milliseconds(), now+60_000, token), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, store.Claim{Key: "k", Status: store.Won, Fence: 7, Token: token}); err != nil {
		t.Fatal(err)
	}
	r := readRecord(t, client, prefix+"k")
	if r.fence <= 7 || r.expiresAt < now+ttl.Milliseconds() || r.pexpireAt != r.expiresAt {
		t.Errorf("released record = %+v, want a fence above 7 and an expiry (and deletion) a ttl from now, at %d or later", r, now+ttl.Milliseconds())
	}
}

// TestExpiredRecordMadeAnewAboveItsFences lets Redis itself delete a
// record (no grace: PEXPIREAT is expiresAt): the key is absent again, and
// the next Claim starts a fresh record above every fence the deleted one
// handed out, so that neither its holder nor a sink that keeps the highest
// fence mistakes one for the other.
func TestExpiredRecordMadeAnewAboveItsFences(t *testing.T) {
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix, TTL: 40 * time.Millisecond, Grace: -1})
	ctx := t.Context()
	var last store.Claim
	for range 3 { // raise the fence three times
		c, err := s.Claim(ctx, "k", 20*time.Millisecond)
		if err != nil || c.Status != store.Won || c.Fence <= last.Fence {
			t.Fatalf("Claim = %+v, %v; want Won above fence %d", c, err, last.Fence)
		}
		if err := s.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
		last = c
	}
	c, err := s.Claim(ctx, "k", 20*time.Millisecond)
	if err != nil || c.Fence < last.Fence+2 {
		t.Fatalf("Claim = %+v, %v; want a fence of at least %d", c, err, last.Fence+2)
	}
	// Wait for Redis to delete the key: lease + ttl, about 60ms.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := client.Exists(ctx, prefix+"k").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Redis kept the record past its expiry")
		}
	}
	fresh, err := s.Claim(ctx, "k", 20*time.Millisecond)
	if err != nil || fresh.Status != store.Won || fresh.Fence <= c.Fence {
		t.Fatalf("Claim after Redis deleted the record = %+v, %v; want Won above fence %d", fresh, err, c.Fence)
	}
	if ok, err := s.Complete(ctx, c); ok || err != nil {
		t.Fatalf("the deleted record's holder: Complete = %v, %v; want false", ok, err)
	}
}

// TestExtendLayout checks that Extend moves the lease from the server's
// clock and never pulls expiresAt (or the key's deletion) in.
func TestExtendLayout(t *testing.T) {
	const ttl = time.Hour
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix, TTL: ttl})
	ctx := t.Context()
	c, err := s.Claim(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := serverMillis(t, client)
	long, err := s.Extend(ctx, c, 2*time.Hour)
	after := serverMillis(t, client)
	if err != nil {
		t.Fatal(err)
	}
	r := readRecord(t, client, prefix+"k")
	if r.leaseUntil != long.LeaseUntil.UnixMilli() || r.leaseUntil < before+2*3600_000 || r.leaseUntil > after+2*3600_000 {
		t.Errorf("extended leaseUntil %d (returned %d), want server TIME + 2h in [%d, %d]", r.leaseUntil, long.LeaseUntil.UnixMilli(), before+2*3600_000, after+2*3600_000)
	}
	if r.expiresAt != r.leaseUntil+ttl.Milliseconds() || r.pexpireAt != r.expiresAt+ttl.Milliseconds() {
		t.Errorf("after a long Extend: %+v, want expiresAt = leaseUntil + ttl and deletion a grace (the ttl) later", r)
	}
	if r.state != "C" || r.fence != c.Fence || r.token != c.Token {
		t.Errorf("Extend changed the claim: %+v, want state C, fence %d, token %q", r, c.Fence, c.Token)
	}
	was := r
	if _, err := s.Extend(ctx, long, time.Minute); err != nil {
		t.Fatal(err)
	}
	r = readRecord(t, client, prefix+"k")
	if r.expiresAt != was.expiresAt || r.pexpireAt != was.pexpireAt {
		t.Errorf("a shorter Extend moved the expiry in: %+v, was %+v", r, was)
	}
}
