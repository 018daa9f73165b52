// Package seedrand carries a seeded random source in a context, so that a
// simulation can make the library's own random draws (the jitter of lease
// renewals) replay with its seed. Only code inside this module can put one
// there; without one, the library draws from math/rand/v2's global source.
package seedrand

import (
	"context"
	"math/rand/v2"
	"sync"
)

// Source is a random source safe for concurrent use.
type Source struct {
	mu sync.Mutex // guards r
	r  *rand.Rand
}

// New returns a Source drawing from a PCG seeded with seed1 and seed2.
func New(seed1, seed2 uint64) *Source {
	return &Source{r: rand.New(rand.NewPCG(seed1, seed2))}
}

type key struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s *Source) context.Context {
	return context.WithValue(ctx, key{}, s)
}

// Int64N returns a number in [0, n) from ctx's Source, or from the global
// source when ctx carries none. n must be positive.
func Int64N(ctx context.Context, n int64) int64 {
	if s, ok := ctx.Value(key{}).(*Source); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.r.Int64N(n)
	}
	return rand.Int64N(n)
}
