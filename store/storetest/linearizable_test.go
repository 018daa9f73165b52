package storetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemgate/idemgate/store"
)

// counting counts the calls made to a store.
type counting struct {
	*model
	calls atomic.Int64
}

func (c *counting) Claim(ctx context.Context, k string, l time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	c.calls.Add(1)
	return c.model.Claim(ctx, k, l, opts)
}

func (c *counting) Complete(ctx context.Context, cl store.Claim) (bool, error) {
	c.calls.Add(1)
	return c.model.Complete(ctx, cl)
}

func (c *counting) Release(ctx context.Context, cl store.Claim) error {
	c.calls.Add(1)
	return c.model.Release(ctx, cl)
}

func (c *counting) Extend(ctx context.Context, cl store.Claim, l time.Duration) (store.Claim, error) {
	c.calls.Add(1)
	return c.model.Extend(ctx, cl, l)
}

func (c *counting) Fail(ctx context.Context, cl store.Claim, f store.Failure) (int, bool, error) {
	c.calls.Add(1)
	return c.model.Fail(ctx, cl, f)
}

func (c *counting) Retry(ctx context.Context, k string) (bool, error) {
	c.calls.Add(1)
	return c.model.Retry(ctx, k)
}

func TestLinearizableHonoursTheOpsBudget(t *testing.T) {
	const budget = 60
	var st *counting
	cfg := modelConfig(bugs{})
	newStore := cfg.NewStore
	cfg.NewStore = func(t testing.TB, s Setup) store.Store {
		st = &counting{model: newStore(t, s).(*model)}
		return st
	}
	cfg.LinearizabilityOps = budget
	if err := runCase(t, cfg, testCase{"Linearizable", longTTL, linearizable}, false); err != nil {
		t.Fatal(err)
	}
	// A round already started when the budget ran out still settles its
	// claim: at most a Claim, a Retry and the Claim again, two retries or
	// extends, a settle and a late call.
	const most = budget + linClients*7
	if n := st.calls.Load(); n < budget || n > most {
		t.Fatalf("the case made %d calls with LinearizabilityOps = %d, want %d to %d", n, budget, budget, most)
	}
}

func TestOverlapping(t *testing.T) {
	claim := linCall{op: opClaim}
	h := []porcupine.Operation{
		op(0, 0, 10, claim, linResult{}),  // meets the next at 10
		op(1, 10, 20, claim, linResult{}), //
		op(1, 21, 30, claim, linResult{}), // contains the next
		op(0, 22, 25, claim, linResult{}), //
		op(2, 40, 50, claim, linResult{}), // alone
	}
	if got := overlapping(h); got != 4 {
		t.Fatalf("overlapping = %d, want 4", got)
	}
}
