package faultmatrix_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/faultmatrix"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// The checker is tested against a surface that calls Gateway.Lock directly
// (ack: nil or ErrDuplicate), first as it is, then with one planted bug per
// invariant: each must be caught, in the cell that shows it, by name.

// bugs are the defects a lockSurface can plant.
type bugs struct {
	ackEverything  bool // acks whatever Lock returned
	skipBody       bool // acks without running the body
	noRenew        bool // the gateway does not renew its lease
	releaseNothing bool // the store ignores Release
	foreignPanic   bool // a panic comes out as another value
}

// lockSurface is a Surface over Gateway.Lock in a synctest bubble.
func lockSurface(bug bugs) faultmatrix.Surface {
	return faultmatrix.Surface{
		SlowDelay:    time.Second,
		PanicAllowed: func(b faultmatrix.Behaviour, p any) bool { return b.Panics() && p == faultmatrix.PanicValue },
		Cell: func(t *testing.T, delay time.Duration, test func(*testing.T, *faultmatrix.Harness)) {
			synctest.Test(t, func(t *testing.T) {
				var inner store.Store // a fresh memstore
				if bug.releaseNothing {
					mem, err := memstore.New(nil)
					if err != nil {
						t.Fatal(err)
					}
					inner = releaseNothing{mem}
				}
				g, st, log := faultmatrix.NewGateway(t, inner, delay, gateway.Options{NoRenew: bug.noRenew, Lease: time.Minute})
				test(t, &faultmatrix.Harness{
					Store: st, Key: "k", Lease: time.Minute, Log: log, Advance: time.Sleep, Patience: time.Hour,
					Deliver: func(ctx context.Context, b faultmatrix.Behaviour, body *faultmatrix.Body) faultmatrix.Outcome {
						return deliverLock(ctx, g, bug, b, body)
					},
				})
			})
		},
	}
}

func deliverLock(ctx context.Context, g *gateway.Gateway, bug bugs, b faultmatrix.Behaviour, body *faultmatrix.Body) (o faultmatrix.Outcome) {
	if bug.skipBody {
		return faultmatrix.Outcome{Acked: true}
	}
	defer func() {
		if p := recover(); p != nil {
			if bug.foreignPanic {
				p = fmt.Sprint("wrapped: ", p)
			}
			o = faultmatrix.Outcome{Panic: p}
		}
	}()
	err := g.Lock(ctx, "k", func(ctx context.Context) error {
		defer body.Enter(ctx)()
		switch b {
		case faultmatrix.Error:
			return errors.New("failed")
		case faultmatrix.Panic:
			panic(faultmatrix.PanicValue)
		}
		return nil
	})
	acked := err == nil || errors.Is(err, gateway.ErrDuplicate) || bug.ackEverything
	return faultmatrix.Outcome{Acked: acked, Detail: fmt.Sprint(err)}
}

// releaseNothing is a store whose Release does nothing.
type releaseNothing struct{ *memstore.Store }

func (releaseNothing) Release(context.Context, store.Claim) error { return nil }

// reporter is a testing.TB that keeps the failures of one Check.
type reporter struct {
	testing.TB // nil: only the methods below are called

	mu     sync.Mutex // guards errors
	errors []string
}

func (r *reporter) Helper()             {}
func (r *reporter) Logf(string, ...any) {}

func (r *reporter) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *reporter) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// check runs one cell of s against a reporter and returns its failures.
func check(t *testing.T, s faultmatrix.Surface, b faultmatrix.Behaviour, f faultmatrix.Fault) []string {
	t.Helper()
	r := &reporter{}
	s.Cell(t, 0, func(t *testing.T, h *faultmatrix.Harness) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			faultmatrix.Check(r, &s, h, b, f)
		}()
		<-done
	})
	return r.errors
}

func TestCheckPassesGatewayLock(t *testing.T) {
	s := lockSurface(bugs{})
	s.Behaviours = []faultmatrix.Behaviour{faultmatrix.OK, faultmatrix.Error, faultmatrix.Panic}
	faultmatrix.Run(t, s)
}

func TestCheckCatchesPlantedBugs(t *testing.T) {
	none := faultmatrix.Faults[0]
	tests := []struct {
		name string
		bug  bugs
		row  faultmatrix.Behaviour
		rule string // a part of the failure that names the invariant
	}{
		{"a failure acked", bugs{ackEverything: true}, faultmatrix.Error, "1 (an ack means DONE)"},
		{"the lease lapses under a running body", bugs{noRenew: true}, faultmatrix.OK, "2 (a body never runs twice at once)"},
		{"a nack leaves the key held", bugs{releaseNothing: true}, faultmatrix.Error, "3 (a nack leaves the key claimable)"},
		{"another panic escapes", bugs{foreignPanic: true}, faultmatrix.Panic, "4 (nothing panics out but what is documented)"},
		{"nothing runs", bugs{skipBody: true}, faultmatrix.OK, "ok/none (a clean delivery acks and runs the body once)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failures := check(t, lockSurface(tt.bug), tt.row, none)
			want := "cell " + string(tt.row) + "/none: invariant " + tt.rule
			for _, f := range failures {
				if strings.HasPrefix(f, want) {
					return
				}
			}
			t.Errorf("the checker missed the bug: want a failure starting %q, got %q", want, failures)
		})
	}
}
