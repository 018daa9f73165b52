package redisstore_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

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
