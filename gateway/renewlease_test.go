package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// These tests hold renewal to the rule that keeps two bodies of one key
// from running at once (SPEC section 10, invariant 2): the gateway's idea
// of when its lease ends must never be later than the store's. The store
// starts a lease when it applies a Claim or an Extend, which is somewhere
// between the call's sending and its answer; so the gateway counts each
// lease from the sending. Each test makes a store's answer come long
// after it applied the call, which is where counting from the answer goes
// wrong; and a claim the store says is gone (ErrFenced) is given up at
// once, not retried like an outage.

// lateReplies is a store whose chosen calls are applied at once and
// answered later.
type lateReplies struct {
	*memstore.Store
	claimReply  time.Duration // the first Claim's answer comes this late
	extendReply time.Duration // the first Extend's answer comes this late
	failLater   bool          // every Extend after the first fails unapplied
	claims      atomic.Int32
	extends     atomic.Int32
}

func (s *lateReplies) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	c, err := s.Store.Claim(ctx, key, lease, opts)
	if s.claims.Add(1) == 1 {
		time.Sleep(s.claimReply)
	}
	return c, err
}

func (s *lateReplies) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	n := s.extends.Add(1)
	if n > 1 && s.failLater {
		return store.Claim{}, errInjected
	}
	nc, err := s.Store.Extend(ctx, c, lease)
	if n == 1 {
		time.Sleep(s.extendReply)
	}
	return nc, err
}

// A Claim applied at once and answered at 0.8 of the lease: the store's
// lease ends at 1.0, so the first renewal must already be due when the
// answer comes. Counted from the answer, it would come at 1.1 at the
// earliest, and a redelivery at 1.05 would win the key beside the body.
func TestRenewalCountsFromTheClaimsSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		const lease = gateway.DefaultRenewedLease
		st := &lateReplies{Store: mem, claimReply: lease * 8 / 10}
		g := renewingGateway(t, st)
		start := time.Now()
		err := g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			time.Sleep(time.Until(start.Add(lease * 105 / 100)))
			if c, err := mem.Claim(context.Background(), "m1", lease, store.ClaimOptions{}); err != nil || c.Status != store.HeldByOther {
				t.Errorf("a redelivery at 1.05 leases after the Claim was sent = %v, %v; want HeldByOther: the renewal must count from the Claim's sending", c.Status, err)
			}
			return ctx.Err()
		})
		if err != nil {
			t.Fatalf("Lock = %v", err)
		}
	})
}

// An Extend answering ErrFenced means the claim is gone (an operator's
// Forget, a takeover): the body is cancelled at that renewal, within about
// a third of the lease, not retried until its own lease runs out.
func TestRenewalGivesUpAtAFencedExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		const lease = gateway.DefaultRenewedLease
		g := renewingGateway(t, mem)
		start := time.Now()
		var cancelled time.Duration
		err := g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			if ok, err := mem.Forget(context.Background(), "m1"); err != nil || !ok {
				t.Fatalf("Forget = %v, %v", ok, err)
			}
			<-ctx.Done()
			cancelled = time.Since(start)
			return context.Cause(ctx)
		})
		if !errors.Is(err, gateway.ErrLeaseLost) {
			t.Fatalf("Lock = %v, want ErrLeaseLost", err)
		}
		// The first renewal is due at a third of the lease, ±10%.
		if limit := lease/3 + lease/30; cancelled > limit {
			t.Fatalf("body cancelled %v after its claim was forgotten; want at the first renewal, by %v", cancelled, limit)
		}
	})
}

// An Extend applied at once and answered half a lease later, then Extends
// that fail: the store's lease ends a lease after the slow Extend was
// sent, and the body must be cancelled before then. Counted from the
// answer, the gateway would give up half a lease too late, while a
// redelivery could already win the key.
func TestRenewalDeadlineCountsFromTheExtendsSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		const lease = gateway.DefaultRenewedLease
		st := &lateReplies{Store: mem, extendReply: lease / 2, failLater: true}
		g := renewingGateway(t, st)
		err := g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			<-ctx.Done()
			if c, err := mem.Claim(context.Background(), "m1", lease, store.ClaimOptions{}); err != nil || c.Status != store.HeldByOther {
				t.Errorf("a redelivery when the body is cancelled = %v, %v; want HeldByOther: the gateway must give up before the store's lease ends", c.Status, err)
			}
			return context.Cause(ctx)
		})
		if !errors.Is(err, gateway.ErrLeaseLost) {
			t.Fatalf("Lock = %v, want ErrLeaseLost", err)
		}
		if st.extends.Load() < 2 {
			t.Fatalf("%d Extends; want the slow one and failing ones after it", st.extends.Load())
		}
	})
}

// Once the body has returned, its claim is still renewed while Complete is
// retried, and a renewal that finds the claim gone (an operator's Forget)
// says so at WARN: Complete's answer tells the rest, and there is no body
// left to cancel. Renewals that succeed meanwhile say nothing.
func TestRenewalLostWhileCompleting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		fs := &faulty{Store: mem}
		fs.completeFailures.Store(8) // about 4.5 s of retries
		const lease = 2 * time.Second
		l := &logs{}
		g, err := gateway.New(fs, &gateway.Options{Lease: lease, Logger: l.logger()})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- g.Lock(context.Background(), "m1", func(context.Context) error { return nil }) }()
		time.Sleep(lease) // Completes failing, renewals succeeding
		if n := fs.extends.Load(); n < 2 {
			t.Fatalf("%d Extends in the first lease of Complete's retries; want the claim renewed", n)
		}
		if lost := l.Records().Containing("claim lost"); len(lost) != 0 {
			t.Errorf("renewals that succeeded logged a lost claim:\n%s", lost)
		}
		if ok, err := mem.Forget(context.Background(), "m1"); err != nil || !ok {
			t.Fatalf("Forget = %v, %v", ok, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Lock = %v, want nil: the work is done", err)
		}
		lost := l.Records().Containing("claim lost")
		if len(lost) != 1 || lost[0].Level != slog.LevelWarn || lost[0].Message != "idemgate: claim lost while its completion was being recorded" {
			t.Errorf("lines about the lost claim:\n%s\nwant one WARN: claim lost while its completion was being recorded", lost)
		}
	})
}

// An Extend that finds the key DONE is the body's own completion (its
// CompleteTx) only under the body's fence. Here another delivery took the
// key over and completed it under a fence of its own: the body lost its
// claim, and is cancelled at the next renewal, not left to run on
// unguarded as if it had completed.
func TestRenewalDetectsATakeoverThatCompleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		const lease = gateway.DefaultRenewedLease
		g := renewingGateway(t, mem)
		err := g.Lock(t.Context(), "m1", func(ctx context.Context) error {
			mine, _ := gateway.ClaimFromContext(ctx)
			bg := context.Background()
			mem.Release(bg, mine) // the claim lapses, say
			other, err := mem.Claim(bg, "m1", lease, store.ClaimOptions{})
			if err != nil || other.Status != store.Won {
				t.Fatalf("the other delivery's Claim = %v, %v; want Won", other.Status, err)
			}
			if ok, err := mem.Complete(bg, other); !ok || err != nil {
				t.Fatalf("the other delivery's Complete = %v, %v", ok, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(lease):
				t.Error("the body was not cancelled within a lease of the takeover")
			}
			return context.Cause(ctx)
		})
		if !errors.Is(err, gateway.ErrLeaseLost) {
			t.Fatalf("Lock = %v, want ErrLeaseLost", err)
		}
	})
}
