package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
)

// claim calls Claim and fails on error or an unexpected status.
func (e *env) claimE(key string, lease time.Duration, want store.Status, rule string) (store.Claim, error) {
	return e.claimWithE(store.ClaimOptions{}, key, lease, want, rule)
}

// claimWith is claim with opts.
func (e *env) claimWithE(opts store.ClaimOptions, key string, lease time.Duration, want store.Status, rule string) (store.Claim, error) {
	c, err := e.s.Claim(e.ctx, key, lease, opts)
	if err != nil {
		return c, fmt.Errorf("%s: Claim(%.40q) error: %w", rule, key, err)
	}
	if c.Status != want {
		return c, fmt.Errorf("%s: Claim(%.40q) = %v, want %v", rule, key, c.Status, want)
	}
	if c.Key != key {
		return c, fmt.Errorf("%s: Claim returned Key %.40q, want %.40q", rule, c.Key, key)
	}
	return c, nil
}

func (e *env) completeE(c store.Claim, want bool, rule string) error {
	ok, err := e.s.Complete(e.ctx, c)
	if err != nil {
		return fmt.Errorf("%s: Complete error: %w", rule, err)
	}
	if ok != want {
		return fmt.Errorf("%s: Complete = %v, want %v", rule, ok, want)
	}
	return nil
}

func (e *env) releaseE(c store.Claim, rule string) error {
	if err := e.s.Release(e.ctx, c); err != nil {
		return fmt.Errorf("%s: Release error: %w", rule, err)
	}
	return nil
}

func fenceIsE(c store.Claim, want int64, rule string) error {
	if c.Fence != want {
		return fmt.Errorf("%s: fence = %d, want %d", rule, c.Fence, want)
	}
	return nil
}

var errNoExtender = errors.New("store does not implement store.Extender")

func violated(format string, args ...any) error { return fmt.Errorf(format, args...) }

func extender(e *env) (store.Extender, error) {
	x, ok := e.s.(store.Extender)
	if !ok {
		return nil, errNoExtender
	}
	return x, nil
}
