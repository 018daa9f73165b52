package gateway_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// These tests hold the renewal schedule to what Options.NoRenew and
// Options.RenewJitter promise: a renewal every third of the lease, jittered by ±10%
// so that holders do not renew in step, each on its own, so that one
// claim's slow store does not delay another's renewal.

// extendTimes records when each key's Extends were sent; the Extends of
// the keys in hang wait for their context to end, those of the keys in
// fail fail at once.
type extendTimes struct {
	*memstore.Store
	hang, fail map[string]bool
	mu         sync.Mutex // guards sent
	sent       map[string][]time.Time
}

func (s *extendTimes) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	s.mu.Lock()
	s.sent[c.Key] = append(s.sent[c.Key], time.Now())
	s.mu.Unlock()
	if s.hang[c.Key] {
		<-ctx.Done()
		return store.Claim{}, ctx.Err()
	}
	if s.fail[c.Key] {
		return store.Claim{}, errInjected
	}
	return s.Store.Extend(ctx, c, lease)
}

func (s *extendTimes) times(key string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent[key])
}

// Each renewal comes a third of the lease after the Claim or the last
// renewal was sent, give or take a tenth of that, and not always at the
// same distance.
func TestRenewalEveryThirdOfTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		st := &extendTimes{Store: mem, sent: map[string][]time.Time{}}
		g := renewingGateway(t, st)
		const lease = gateway.DefaultRenewedLease
		start := time.Now()
		if err := g.Lock(t.Context(), "m1", func(context.Context) error { time.Sleep(5 * lease); return nil }); err != nil {
			t.Fatalf("Lock = %v", err)
		}
		sent := st.times("m1")
		if len(sent) < 13 {
			t.Fatalf("%d renewals in 5 leases, want 13 to 16", len(sent))
		}
		gaps := map[time.Duration]bool{}
		last := start
		for i, at := range sent {
			gap := at.Sub(last)
			if lo, hi := lease/3-lease/30, lease/3+lease/30; gap < lo || gap > hi {
				t.Errorf("renewal %d came %v after the one before, want %v to %v", i+1, gap, lo, hi)
			}
			gaps[gap] = true
			last = at
		}
		if len(gaps) < 2 {
			t.Errorf("every renewal came %v after the one before: no jitter", sent[0].Sub(start))
		}
	})
}

// Two claims due for renewal at the same instant are renewed at that
// instant, both, even when the store leaves each Extend hanging: one
// claim's slow store must not hold up another's renewal.
func TestRenewalsDueTogetherDoNotWaitForEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		st := &extendTimes{Store: mem, hang: map[string]bool{"a": true, "b": true}, sent: map[string][]time.Time{}}
		// The same jitter for both: the same due instant.
		jitter := func(_ context.Context, lease time.Duration) time.Duration { return lease / 40 }
		g, err := gateway.New(st, &gateway.Options{Logger: (&logs{}).logger(), RenewJitter: jitter})
		if err != nil {
			t.Fatal(err)
		}
		const lease = gateway.DefaultRenewedLease
		start := time.Now()
		var wg sync.WaitGroup
		for _, key := range []string{"a", "b"} {
			wg.Go(func() {
				g.Lock(t.Context(), key, func(ctx context.Context) error { <-ctx.Done(); return nil })
			})
		}
		wg.Wait()
		a, b := st.times("a"), st.times("b")
		if len(a) == 0 || len(b) == 0 {
			t.Fatalf("Extends sent for a at %v, for b at %v; want both renewed", a, b)
		}
		if !a[0].Equal(b[0]) {
			t.Fatalf("first renewals at %v and %v after the Claims: the test needs them due together", a[0].Sub(start), b[0].Sub(start))
		}
		for key, sent := range map[string][]time.Time{"a": a, "b": b} {
			if at := sent[0].Sub(start); at > lease/3+lease/30 {
				t.Errorf("claim %s first renewed %v after its Claim, want by %v: it waited for the other's Extend", key, at, lease/3+lease/30)
			}
		}
	})
}

// A renewal that fails is retried at most a tenth of the lease later, and
// sooner as the give-up point nears (a sixth of the lease before the lease
// ends), but never in steps under a fiftieth of the lease: the body is
// cancelled when no such step is left, by that point.
func TestRenewalRetriesUntilTheGiveUpPoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		st := &extendTimes{Store: mem, fail: map[string]bool{"m1": true}, sent: map[string][]time.Time{}}
		g := renewingGateway(t, st)
		const lease = gateway.DefaultRenewedLease
		start := time.Now()
		var cancelled time.Duration
		g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			<-ctx.Done()
			cancelled = time.Since(start)
			return nil
		})
		sent := st.times("m1")
		if len(sent) < 3 {
			t.Fatalf("%d Extends; want the first renewal and retries", len(sent))
		}
		for i := 1; i < len(sent); i++ {
			if gap := sent[i].Sub(sent[i-1]); gap > lease/10 || gap < lease/50 {
				t.Errorf("retry %d came %v after the failure before it; want %v to %v", i, gap, lease/50, lease/10)
			}
		}
		if giveUp := lease - lease/6; cancelled > giveUp-lease/50 || cancelled != sent[len(sent)-1].Sub(start) {
			t.Errorf("body cancelled %v after the Claim, the last Extend at %v; want at that Extend's failure, by %v (a fiftieth of the lease before the give-up point)",
				cancelled, sent[len(sent)-1].Sub(start), giveUp-lease/50)
		}
	})
}

// slowClaim answers its Claims late, after applying them at once.
type slowClaim struct {
	*extendTimes
	reply time.Duration
}

func (s *slowClaim) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	c, err := s.extendTimes.Claim(ctx, key, lease, opts)
	time.Sleep(s.reply)
	return c, err
}

// A Claim answered at 0.8 of the lease leaves its first renewal late; that
// renewal still gets a real attempt, a tenth of the lease long, but no
// more: when it hangs, the body is cancelled before the store's lease,
// counted from the Claim's sending, ends.
func TestLateRenewalAttemptIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		const lease = gateway.DefaultRenewedLease
		st := &slowClaim{extendTimes: &extendTimes{Store: mem, hang: map[string]bool{"m1": true}, sent: map[string][]time.Time{}}, reply: lease * 8 / 10}
		g := renewingGateway(t, st)
		start := time.Now()
		var cancelled time.Duration
		g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				cancelled = time.Since(start)
			case <-time.After(2 * lease):
				cancelled = 2 * lease
			}
			return nil
		})
		if len(st.times("m1")) == 0 {
			t.Fatal("no Extend was tried after the late Claim")
		}
		if cancelled >= lease {
			t.Errorf("body cancelled %v after the Claim was sent; want before its %v lease ended", cancelled, lease)
		}
	})
}
