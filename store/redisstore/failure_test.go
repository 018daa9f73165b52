package redisstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

// TestFailureLayout pins the A layout through a failing key's life: a
// counted failure releases the claim and keeps the count, the reason and
// the first failure, which the next holder's Claim keeps too; the failure
// that spends the budget writes FAILED under the claim's fence, without
// the token but with the fingerprint and the origin, and expires a ttl
// after it; Retry writes the record back without failures, in the O
// layout.
func TestFailureLayout(t *testing.T) {
	const ttl = time.Hour
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix, TTL: ttl})
	ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: []byte("fp:\x00"), Origin: "push/m-101"}
	budget := store.Failure{Reason: "timeout", MaxAttempts: 2}

	a, err := s.Claim(ctx, "k", time.Minute, opts)
	if err != nil || a.Status != store.Won {
		t.Fatalf("Claim = %+v, %v; want Won", a, err)
	}
	before := serverMillis(t, client)
	if n, failed, err := s.Fail(ctx, a, budget); n != 1 || failed || err != nil {
		t.Fatalf("Fail below the budget = %d, %v, %v; want 1, false", n, failed, err)
	}
	after := serverMillis(t, client)
	r := readRecord(t, client, prefix+"k")
	if r.state != "AC" || r.fence <= a.Fence || r.token != "" || r.fp != "" || r.origin != "push/m-101" {
		t.Errorf("record after a counted failure = %+v, want AC released above fence %d with the origin only", r, a.Fence)
	}
	if r.attempts != 1 || r.reason != "timeout" || r.firstFailure != r.leaseUntil || r.leaseUntil < before || r.leaseUntil > after {
		t.Errorf("record after a counted failure = %+v, want 1 attempt, reason timeout, first failure = lease end = the server's now in [%d, %d]", r, before, after)
	}
	first := r.firstFailure

	b, err := s.Claim(ctx, "k", time.Minute, opts)
	if err != nil || b.Status != store.Won {
		t.Fatalf("Claim of the released record = %+v, %v; want Won", b, err)
	}
	raw := client.Get(ctx, prefix+"k").Val()
	want := fmt.Sprintf("AC%d:%d:%d:4:10:1:%d:7:fp:\x00push/m-101timeout%s",
		b.Fence, b.LeaseUntil.UnixMilli(), b.LeaseUntil.UnixMilli()+ttl.Milliseconds(), first, b.Token)
	if raw != want {
		t.Errorf("record won after a counted failure = %q, want %q", raw, want)
	}

	budget.Reason = "customer gone"
	before = serverMillis(t, client)
	if n, failed, err := s.Fail(ctx, b, budget); n != 2 || !failed || err != nil {
		t.Fatalf("Fail that spends the budget = %d, %v, %v; want 2, true", n, failed, err)
	}
	after = serverMillis(t, client)
	r = readRecord(t, client, prefix+"k")
	if r.state != "AF" || r.fence != b.Fence || r.token != "" || r.fp != "fp:\x00" || r.origin != "push/m-101" {
		t.Errorf("FAILED record = %+v, want AF at fence %d, no token, the fingerprint and the origin", r, b.Fence)
	}
	if r.attempts != 2 || r.reason != "customer gone" || r.firstFailure != first {
		t.Errorf("FAILED record = %+v, want 2 attempts, reason %q, first failure %d", r, "customer gone", first)
	}
	if r.leaseUntil < before || r.leaseUntil > after || r.expiresAt != r.leaseUntil+ttl.Milliseconds() || r.pexpireAt != r.expiresAt+ttl.Milliseconds() {
		t.Errorf("FAILED record = %+v, want leaseUntil the failure in [%d, %d], expiresAt a ttl later, deletion a grace (the ttl) after that", r, before, after)
	}
	if n, err := client.MemoryUsage(ctx, prefix+"k").Result(); err == nil {
		t.Logf("a FAILED record with a %d-byte key, a %d-byte fingerprint, a %d-byte origin and a %d-byte reason uses %d bytes (MEMORY USAGE), value %d bytes",
			len(prefix+"k"), len(r.fp), len(r.origin), len(r.reason), n, len(client.Get(ctx, prefix+"k").Val()))
	}

	if ok, err := s.Retry(ctx, "k"); !ok || err != nil {
		t.Fatalf("Retry = %v, %v; want true", ok, err)
	}
	if r := readRecord(t, client, prefix+"k"); r.state != "OC" || r.fence <= b.Fence || !strings.HasPrefix(r.token, "free:") || r.origin != "push/m-101" {
		t.Errorf("retried record = %+v, want OC above fence %d with the origin, no failures and the token of the Retry that freed it", r, b.Fence)
	}
}

// TestDoneKeepsFailures: a Complete after counted failures writes DONE in
// the A layout, keeping the count and the last reason for the operator.
func TestDoneKeepsFailures(t *testing.T) {
	client := newClient(t)
	prefix := uniquePrefix(t)
	s := newStore(t, client, &redisstore.Options{Prefix: prefix})
	ctx := t.Context()
	a, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Fail(ctx, a, store.Failure{Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{})
	if err != nil || b.Status != store.Won {
		t.Fatalf("Claim of the released record = %+v, %v; want Won", b, err)
	}
	if ok, err := s.Complete(ctx, b); !ok || err != nil {
		t.Fatalf("Complete = %v, %v; want true", ok, err)
	}
	if r := readRecord(t, client, prefix+"k"); r.state != "AD" || r.fence != b.Fence || r.token != "" || r.attempts != 1 || r.reason != "timeout" {
		t.Errorf("completed record = %+v, want AD at fence %d with 1 attempt, reason timeout", r, b.Fence)
	}
	r, ok, err := s.Inspect(ctx, "k")
	if err != nil || !ok || r.State != store.Done || r.Attempts != 1 || r.Reason != "timeout" || r.FirstFailure.IsZero() {
		t.Errorf("Inspect = %+v, %v, %v; want DONE with 1 attempt, reason timeout and its first failure", r, ok, err)
	}
}
