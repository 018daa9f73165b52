package redisstore_test

import (
	"bytes"
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
	state                 string // as stored: lower case when a fingerprint follows, after O when an origin does, after A when failures do
	fence                 int64
	leaseUntil, expiresAt int64 // unix ms on the server's clock
	fp                    string
	origin                string
	attempts              int
	firstFailure          int64 // unix ms on the server's clock
	reason                string
	token                 string
	pexpireAt             int64 // when Redis deletes the key, unix ms
}

var recordLayout = regexp.MustCompile(`(?s)^(A[CDF]|O[CD]|[CDcd])(\d+):(\d+):(\d+):(.*)$`)

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
			c, err := s.Claim(ctx, "order-42", lease, store.ClaimOptions{})
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
	c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
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
	again, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{Token: c.Token})
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
		c, err := s.Claim(ctx, "k", 20*time.Millisecond, store.ClaimOptions{})
		if err != nil || c.Status != store.Won || c.Fence <= last.Fence {
			t.Fatalf("Claim = %+v, %v; want Won above fence %d", c, err, last.Fence)
		}
		if err := s.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
		last = c
	}
	c, err := s.Claim(ctx, "k", 20*time.Millisecond, store.ClaimOptions{})
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
	fresh, err := s.Claim(ctx, "k", 20*time.Millisecond, store.ClaimOptions{})
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
	c, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
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

// TestOriginLayout pins the O layout through a record's life: the origin
// kept from Claim through Complete, which ends the lease at the
// completion, and through Release; with a fingerprint beside it.
func TestOriginLayout(t *testing.T) {
	const ttl = time.Hour
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix, TTL: ttl})
	ctx, opts := t.Context(), store.ClaimOptions{Origin: "push/m-101"}
	c, err := s.Claim(ctx, "k", time.Minute, opts)
	if err != nil || c.Status != store.Won || c.Origin != "push/m-101" {
		t.Fatalf("Claim = %+v, %v; want Won with origin push/m-101", c, err)
	}
	raw := client.Get(ctx, prefix+"k").Val()
	if want := fmt.Sprintf("OC%d:%d:%d:0:10:push/m-101%s", c.Fence, c.LeaseUntil.UnixMilli(), c.LeaseUntil.UnixMilli()+ttl.Milliseconds(), c.Token); raw != want {
		t.Errorf("claimed record = %q, want %q", raw, want)
	}
	before := serverMillis(t, client)
	if ok, err := s.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete = %v, %v; want true", ok, err)
	}
	after := serverMillis(t, client)
	r := readRecord(t, client, prefix+"k")
	if r.state != "OD" || r.origin != "push/m-101" || r.token != "" || r.fp != "" {
		t.Errorf("completed record = %+v, want OD with the origin and no token", r)
	}
	if r.leaseUntil < before || r.leaseUntil > after || r.expiresAt != r.leaseUntil+ttl.Milliseconds() {
		t.Errorf("completed record = %+v, want leaseUntil the completion in [%d, %d] and expiresAt a ttl later", r, before, after)
	}
	if n, err := client.MemoryUsage(ctx, prefix+"k").Result(); err == nil {
		t.Logf("a DONE record with a %d-byte key and a %d-byte origin uses %d bytes (MEMORY USAGE), value %d bytes", len(prefix+"k"), len(r.origin), n, len(client.Get(ctx, prefix+"k").Val()))
	}

	// With a fingerprint too, and through a Release: the origin stays, the
	// fingerprint and the token go.
	fopts := store.ClaimOptions{Fingerprint: []byte("fp:\x00"), Origin: opts.Origin}
	f, err := s.Claim(ctx, "f", time.Minute, fopts)
	if err != nil || f.Status != store.Won {
		t.Fatalf("Claim = %+v, %v; want Won", f, err)
	}
	if r := readRecord(t, client, prefix+"f"); r.state != "OC" || r.fp != "fp:\x00" || r.origin != "push/m-101" || r.token != f.Token {
		t.Errorf("claimed record = %+v, want OC with the fingerprint, the origin and the token", r)
	}
	if err := s.Release(ctx, f); err != nil {
		t.Fatal(err)
	}
	if r := readRecord(t, client, prefix+"f"); r.state != "OC" || r.fp != "" || r.origin != "push/m-101" || r.token != "" {
		t.Errorf("released record = %+v, want OC with the origin only", r)
	}
}

// TestRecordsBeforeOrigins: records in the layouts written before origins
// existed are read as keeping none, and a Claim with an origin that takes
// one over writes the O layout.
func TestRecordsBeforeOrigins(t *testing.T) {
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix})
	ctx := t.Context()
	now := serverMillis(t, client)
	for key, v := range map[string]string{
		"done":   fmt.Sprintf("D7:%d:%d:", now-1000, now+60_000),
		"donefp": fmt.Sprintf("d7:%d:%d:2:fp", now-1000, now+60_000),
	} {
		if err := client.Set(ctx, prefix+key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		c, err := s.Claim(ctx, key, time.Minute, store.ClaimOptions{Origin: "push/m-2"})
		if err != nil || c.Status != store.AlreadyDone || c.Origin != "" {
			t.Errorf("Claim of %q = %+v, %v; want AlreadyDone with no origin", v, c, err)
		}
		r, ok, err := s.Inspect(ctx, key)
		if err != nil || !ok || r.Origin != "" || r.State != store.Done || r.Fence != 7 || r.Attempts != 0 || !r.FirstFailure.IsZero() {
			t.Errorf("Inspect of %q = %+v, %v, %v; want DONE at fence 7 with no origin and no failures", v, r, ok, err)
		}
	}
	if err := client.Set(ctx, prefix+"lapsed", fmt.Sprintf("C7:%d:%d:tok", now-1000, now+60_000), 0).Err(); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, "lapsed", time.Minute, store.ClaimOptions{Origin: "pull/m-3"})
	if err != nil || c.Status != store.Won || c.Origin != "pull/m-3" {
		t.Fatalf("Claim over a lapsed record = %+v, %v; want Won with origin pull/m-3", c, err)
	}
	if r := readRecord(t, client, prefix+"lapsed"); r.state != "OC" || r.origin != "pull/m-3" || r.token != c.Token {
		t.Errorf("record after the takeover = %+v, want OC with the new origin", r)
	}
}

// fingerprint is a full-size fingerprint made of the bytes a careless
// encoding would trip on: NUL, the layout's colon, a newline, invalid UTF-8.
var fingerprint = bytes.Repeat([]byte("\x00:\n\xff"), store.MaxFingerprintLen/4)

// TestFingerprintLayout pins how a fingerprint is stored through a record's
// life: a lower-case state, its length and its bytes verbatim before the
// token; kept by Extend and Complete, dropped with the upper case by
// Release.
func TestFingerprintLayout(t *testing.T) {
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix})
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: fingerprint, Token: "to:ken"} // the token may hold colons too

	c, err := s.Claim(ctx, "k", time.Minute, opts)
	if err != nil || c.Status != store.Won || !bytes.Equal(c.Fingerprint, fingerprint) {
		t.Fatalf("Claim = %+v, %v; want Won with the fingerprint", c, err)
	}
	raw, err := client.Get(t.Context(), prefix+"k").Result()
	if err != nil {
		t.Fatal(err)
	}
	r := parseRecord(t, raw)
	if want := fmt.Sprintf("c%d:%d:%d:32:%sto:ken", c.Fence, r.leaseUntil, r.expiresAt, fingerprint); raw != want {
		t.Errorf("claimed record = %q, want %q", raw, want)
	}
	again, err := s.Claim(ctx, "k", time.Minute, opts)
	if err != nil || again.Status != store.Won || again.Fence != c.Fence || !bytes.Equal(again.Fingerprint, fingerprint) {
		t.Errorf("retried Claim = %+v, %v; want the win re-affirmed with the kept fingerprint", again, err)
	}
	if c, err = s.Extend(ctx, c, 2*time.Minute); err != nil || !bytes.Equal(c.Fingerprint, fingerprint) {
		t.Fatalf("Extend = %+v, %v; want the claim with its fingerprint", c, err)
	}
	if r := readRecord(t, client, prefix+"k"); r.state != "c" || r.fp != string(fingerprint) || r.token != "to:ken" {
		t.Errorf("extended record = %+v, want state c with the fingerprint and the token", r)
	}
	if ok, err := s.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	r = readRecord(t, client, prefix+"k")
	if r.state != "d" || r.fence != c.Fence || r.fp != string(fingerprint) || r.token != "" {
		t.Errorf("completed record = %+v, want state d, fence %d, the fingerprint, no token", r, c.Fence)
	}
	if n, err := client.MemoryUsage(t.Context(), prefix+"k").Result(); err == nil {
		t.Logf("a DONE record with a %d-byte fingerprint and a %d-byte key uses %d bytes (MEMORY USAGE)", len(fingerprint), len(prefix+"k"), n)
	}

	rel, err := s.Claim(ctx, "r", time.Minute, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, rel); err != nil {
		t.Fatal(err)
	}
	if r := readRecord(t, client, prefix+"r"); r.state != "C" || r.fence <= rel.Fence || r.fp != "" || r.token != "" {
		t.Errorf("released record = %+v, want state C, a fence above %d, no fingerprint, no token", r, rel.Fence)
	}
}

// TestRecordsWithoutFingerprint: records written by the scripts of earlier
// versions have the upper-case layout and no fingerprint. They keep working
// with none, with no migration, and a takeover writes the new layout.
func TestRecordsWithoutFingerprint(t *testing.T) {
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix})
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: fingerprint}
	now := serverMillis(t, client)
	hour := time.Hour.Milliseconds()
	for key, v := range map[string]string{
		"done":     fmt.Sprintf("D3:%d:%d:", now, now+hour),
		"held":     fmt.Sprintf("C3:%d:%d:old", now+hour, now+hour),
		"lapsed":   fmt.Sprintf("C3:%d:%d:old", now-hour, now+hour),
		"complete": fmt.Sprintf("C3:%d:%d:old", now+hour, now+hour),
	} {
		if err := client.Set(t.Context(), prefix+key, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}

	for key, want := range map[string]store.Status{"done": store.AlreadyDone, "held": store.HeldByOther} {
		c, err := s.Claim(ctx, key, time.Minute, opts)
		if err != nil || c.Status != want || c.Fence != 3 || c.Fingerprint != nil {
			t.Errorf("Claim of an old %s record = %+v, %v; want %v at fence 3 with no fingerprint", key, c, err, want)
		}
	}
	c, err := s.Claim(ctx, "lapsed", time.Minute, opts)
	if err != nil || c.Status != store.Won || c.Fence <= 3 || !bytes.Equal(c.Fingerprint, fingerprint) {
		t.Fatalf("Claim of an old lapsed record = %+v, %v; want Won above fence 3 with the fingerprint", c, err)
	}
	if r := readRecord(t, client, prefix+"lapsed"); r.state != "c" || r.fp != string(fingerprint) {
		t.Errorf("taken-over record = %+v, want the fingerprinted layout", r)
	}
	// The holder of an old claim, still running, completes it as before.
	if ok, err := s.Complete(ctx, store.Claim{Key: "complete", Status: store.Won, Fence: 3, Token: "old"}); !ok || err != nil {
		t.Fatalf("Complete of an old claim = %v, %v; want true", ok, err)
	}
	if r := readRecord(t, client, prefix+"complete"); r.state != "D" || r.fence != 3 || r.fp != "" {
		t.Errorf("completed old record = %+v, want state D, fence 3, no fingerprint", r)
	}
}
