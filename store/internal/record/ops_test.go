package record

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgate/idemgate/store"
)

// fakeRound is the read-modify-write primitive of the Google stores
// reduced to a map: each round reads a key's record, calls decide and
// writes what it returns. fail, when set, decides how a round ends: with
// an error, and whether its write landed all the same (a commit whose
// reply was lost).
type fakeRound struct {
	recs     map[string]Record
	now      time.Time
	attempts []int // the attempt number of every round run
	fail     func(attempt int) (err error, landed bool)
}

func (f *fakeRound) round(ctx context.Context, key string, attempt int, decide Decide) error {
	f.attempts = append(f.attempts, attempt)
	var cur *Record
	if r, ok := f.recs[key]; ok {
		cur = &r
	}
	next := decide(cur, f.now)
	err, landed := error(nil), true
	if f.fail != nil {
		err, landed = f.fail(attempt)
	}
	if next != nil && landed {
		f.recs[key] = *next
	}
	return err
}

var (
	errBusy  = errors.New("contention")        // retry after a pause
	errMoved = errors.New("precondition")      // retry at once
	errBroke = errors.New("permission denied") // never retry
)

func classify(err error) (retry, now bool) {
	switch {
	case errors.Is(err, errBusy):
		return true, false
	case errors.Is(err, errMoved):
		return true, true
	}
	return false, false
}

const ttl = time.Hour

func newOps() (*Ops, *fakeRound) {
	f := &fakeRound{recs: map[string]Record{}, now: t0}
	return &Ops{Name: "teststore", Rules: Rules{TTL: ttl}, Round: f.round, Retryable: classify}, f
}

func mustWin(t *testing.T, o *Ops, ctx context.Context, key string) store.Claim {
	t.Helper()
	c, err := o.Claim(ctx, key, time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim(%q) = %+v, %v; want won", key, c, err)
	}
	return c
}

func TestOpsFollowTheContract(t *testing.T) {
	o, f := newOps()
	ctx := t.Context()
	c := mustWin(t, o, ctx, "k")
	if c.Fence != t0.UnixMicro() || !c.LeaseUntil.Equal(t0.Add(time.Minute)) || c.Token == "" || c.Key != "k" {
		t.Fatalf("first Claim = %+v, want fence %d (now in µs), a token, lease a minute from now", c, t0.UnixMicro())
	}
	if got, err := o.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || got.Status != store.HeldByOther || got.Fence != c.Fence {
		t.Fatalf("Claim of a held key = %+v, %v; want held by other at fence %d", got, err, c.Fence)
	}
	ext, err := o.Extend(ctx, c, 2*time.Minute)
	if err != nil || ext.Fence != c.Fence || !ext.LeaseUntil.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("Extend = %+v, %v; want the same fence, lease two minutes from now", ext, err)
	}
	if got := f.recs["k"]; !got.LeaseUntil.Equal(ext.LeaseUntil) || !got.ExpiresAt.Equal(ext.LeaseUntil.Add(ttl)) {
		t.Fatalf("after Extend the record is %+v, want the lease it answered and an expiry a ttl after", got)
	}
	if ok, err := o.Complete(ctx, c); !ok || err != nil {
		t.Fatalf("Complete of the holder = %v, %v; want true", ok, err)
	}
	if f.recs["k"].State != StateDone {
		t.Fatalf("after Complete the record is %+v, want DONE", f.recs["k"])
	}
	if got, err := o.Claim(ctx, "k", time.Minute, store.ClaimOptions{}); err != nil || got.Status != store.AlreadyDone {
		t.Fatalf("Claim of a DONE key = %+v, %v; want already done", got, err)
	}
	if _, err := o.Extend(ctx, c, time.Minute); !errors.Is(err, store.ErrFenced) || f.recs["k"].State != StateDone {
		t.Fatalf("Extend of a DONE record = %v, left %+v; want ErrFenced and the record DONE", err, f.recs["k"])
	}

	// Release frees the key at once, a fence higher.
	r := mustWin(t, o, ctx, "r")
	if err := o.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := f.recs["r"]; got.Fence != r.Fence+1 || got.Token != "" {
		t.Fatalf("after Release the record is %+v, want fence %d and no token", got, r.Fence+1)
	}
	if again := mustWin(t, o, ctx, "r"); again.Fence <= r.Fence+1 {
		t.Fatalf("Claim after Release = fence %d, want above %d", again.Fence, r.Fence+1)
	}
	if ok, err := o.Complete(ctx, r); ok || err != nil {
		t.Fatalf("Complete of a released claim = %v, %v; want false", ok, err)
	}
}

func TestOpsInspectAndForget(t *testing.T) {
	o, f := newOps()
	ctx := t.Context()
	if _, ok, err := o.Inspect(ctx, "k"); ok || err != nil {
		t.Fatalf("Inspect of an absent key = %v, %v; want none", ok, err)
	}
	if ok, err := o.Forget(ctx, "k"); ok || err != nil {
		t.Fatalf("Forget of an absent key = %v, %v; want false", ok, err)
	}
	c := mustWin(t, o, ctx, "k")
	before := len(f.attempts)
	rec, ok, err := o.Inspect(ctx, "k")
	if !ok || err != nil || rec.State != store.Claimed || rec.Fence != c.Fence || rec.Token != c.Token || !rec.ReadAt.Equal(t0) {
		t.Fatalf("Inspect = %+v, %v, %v; want the claim", rec, ok, err)
	}
	if n := len(f.attempts) - before; n != 1 || !reflect.DeepEqual(f.recs["k"], Record{State: StateClaimed, Fence: c.Fence, Token: c.Token, LeaseUntil: c.LeaseUntil, ExpiresAt: c.LeaseUntil.Add(ttl)}) {
		t.Fatalf("Inspect ran %d rounds, left %+v; want one round that writes nothing", n, f.recs["k"])
	}
	if ok, err := o.Forget(ctx, "k"); !ok || err != nil {
		t.Fatalf("Forget of a live key = %v, %v; want true", ok, err)
	}
	if got := f.recs["k"]; got.Fence != c.Fence+1 || got.Token != "" {
		t.Fatalf("after Forget the record is %+v, want fence %d and no token", got, c.Fence+1)
	}
	if ok, _ := o.Complete(ctx, c); ok {
		t.Fatal("Complete of a forgotten claim must return false")
	}
}

func TestOpsCheckTheirArguments(t *testing.T) {
	o, f := newOps()
	ctx := t.Context()
	c := mustWin(t, o, ctx, "k")
	rounds := len(f.attempts)
	held := store.Claim{Key: "k", Status: store.HeldByOther, Fence: c.Fence}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	long := strings.Repeat("x", store.MaxKeyLen+1)
	for _, tc := range []struct {
		name string
		err  error
		want error  // nil: any error whose text begins with prefix
		pre  string // the error's prefix, when it has one
	}{
		{"Claim, cancelled", first(o.Claim(cancelled, "k", time.Minute, store.ClaimOptions{})), context.Canceled, ""},
		{"Claim, empty key", first(o.Claim(ctx, "", time.Minute, store.ClaimOptions{})), store.ErrInvalidKey, ""},
		{"Claim, no lease", first(o.Claim(ctx, "k", 0, store.ClaimOptions{})), nil, "teststore: lease 0s is not positive"},
		{"Claim, negative lease", first(o.Claim(ctx, "k", -time.Second, store.ClaimOptions{})), nil, "teststore: lease -1s is not positive"},
		{"Claim, lease of a ttl", first(o.Claim(ctx, "k", ttl, store.ClaimOptions{})), store.ErrLeaseTooLong, "teststore: Claim: "},
		{"Claim, long fingerprint", first(o.Claim(ctx, "k", time.Minute, store.ClaimOptions{Fingerprint: make([]byte, store.MaxFingerprintLen+1)})), store.ErrInvalidFingerprint, ""},
		{"Complete, not won", first(o.Complete(ctx, held)), store.ErrNotWon, "teststore: Complete: "},
		{"Complete, cancelled", first(o.Complete(cancelled, c)), context.Canceled, ""},
		{"Release, not won", o.Release(ctx, held), store.ErrNotWon, "teststore: Release: "},
		{"Release, cancelled", o.Release(cancelled, c), context.Canceled, ""},
		{"Extend, not won", first(o.Extend(ctx, held, time.Minute)), store.ErrNotWon, "teststore: Extend: "},
		{"Extend, cancelled", first(o.Extend(cancelled, c, time.Minute)), context.Canceled, ""},
		{"Extend, no lease", first(o.Extend(ctx, c, 0)), nil, "teststore: lease 0s is not positive"},
		{"Extend, negative lease", first(o.Extend(ctx, c, -time.Second)), nil, "teststore: lease -1s is not positive"},
		{"Extend, invalid key", first(o.Extend(ctx, store.Claim{Key: long, Status: store.Won, Fence: 1}, time.Minute)), store.ErrFenced, ""},
		{"Inspect, cancelled", second(o.Inspect(cancelled, "k")), context.Canceled, ""},
		{"Inspect, empty key", second(o.Inspect(ctx, "")), store.ErrInvalidKey, ""},
		{"Forget, cancelled", first(o.Forget(cancelled, "k")), context.Canceled, ""},
		{"Forget, empty key", first(o.Forget(ctx, "")), store.ErrInvalidKey, ""},
	} {
		if tc.err == nil || (tc.want != nil && !errors.Is(tc.err, tc.want)) || !strings.HasPrefix(tc.err.Error(), tc.pre) {
			t.Errorf("%s: err = %v, want %v beginning %q", tc.name, tc.err, tc.want, tc.pre)
		}
	}
	// A key no record can have answers without a round.
	if ok, err := o.Complete(ctx, store.Claim{Key: long, Status: store.Won, Fence: 1}); ok || err != nil {
		t.Errorf("Complete of an invalid key = %v, %v; want false, nil", ok, err)
	}
	if err := o.Release(ctx, store.Claim{Key: "", Status: store.Won, Fence: 1}); err != nil {
		t.Errorf("Release of an invalid key = %v, want nil", err)
	}
	if n := len(f.attempts); n != rounds {
		t.Errorf("refused calls ran %d rounds, want none", n-rounds)
	}
	if got := f.recs["k"]; got.Fence != c.Fence || got.Token != c.Token || got.State != StateClaimed {
		t.Errorf("refused calls changed the record to %+v", got)
	}
}

func first[T any](_ T, err error) error { return err }

func second[T, U any](_ T, _ U, err error) error { return err }

// A Claim keeps the caller's fingerprint in a copy of its own: the caller
// may reuse its array.
func TestOpsClaimCopiesTheFingerprint(t *testing.T) {
	o, f := newOps()
	fp := []byte("abc")
	c, err := o.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{Fingerprint: fp})
	if err != nil || string(c.Fingerprint) != "abc" {
		t.Fatalf("Claim = %+v, %v; want fingerprint abc", c, err)
	}
	copy(fp, "xyz")
	if got := f.recs["k"].Fingerprint; string(got) != "abc" {
		t.Fatalf("the record's fingerprint became %q when the caller reused its array", got)
	}
}

// A Claim whose write landed while its round failed is recognised by the
// next round through its token: re-affirmed at the same fence, not
// claimed a second time.
func TestOpsClaimRetryReaffirms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o, f := newOps()
		f.fail = func(attempt int) (error, bool) {
			if attempt == 1 {
				return errBusy, true
			}
			return nil, true
		}
		c := mustWin(t, o, t.Context(), "k")
		if got := f.recs["k"]; c.Fence != got.Fence || c.Token != got.Token || got.Fence != t0.UnixMicro() {
			t.Fatalf("Claim = %+v over a landed first round, record %+v; want the first round's fence and token", c, got)
		}
		if want := []int{1, 2}; !slices.Equal(f.attempts, want) {
			t.Fatalf("attempts = %v, want %v", f.attempts, want)
		}
	})
}

func TestOpsRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		errs     []error // the error of each round; rounds past the list succeed
		attempts int
		pause    [2]time.Duration // the least and most time the call may take
		want     error            // nil for success
		text     string           // in the error
	}{
		{"success", nil, 1, [2]time.Duration{}, nil, ""},
		{"permanent", []error{errBroke}, 1, [2]time.Duration{}, errBroke, `teststore: Complete "k": permission denied`},
		{"busy once", []error{errBusy}, 2, [2]time.Duration{5 * time.Millisecond, 10 * time.Millisecond}, nil, ""},
		{"moved twice", []error{errMoved, errMoved}, 3, [2]time.Duration{}, nil, ""},
		{"busy, then permanent", []error{errBusy, errBusy, errBroke}, 3, [2]time.Duration{15 * time.Millisecond, 30 * time.Millisecond}, errBroke, ""},
		{"busy to the end", []error{errBusy, errBusy, errBusy, errBusy, errBusy, errBusy}, 5, [2]time.Duration{75 * time.Millisecond, 150 * time.Millisecond}, errBusy, `teststore: Complete "k": gave up after 5 attempts: contention`},
		{"moved to the end", []error{errMoved, errMoved, errMoved, errMoved, errMoved}, 5, [2]time.Duration{}, errMoved, "gave up after 5 attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o, f := newOps()
				c := mustWin(t, o, t.Context(), "k")
				f.attempts = nil
				f.fail = func(attempt int) (error, bool) {
					if attempt <= len(tc.errs) {
						return tc.errs[attempt-1], false
					}
					return nil, true
				}
				start := time.Now()
				ok, err := o.Complete(t.Context(), c)
				took := time.Since(start)
				if len(f.attempts) != tc.attempts {
					t.Errorf("rounds = %d, want %d", len(f.attempts), tc.attempts)
				}
				for i, a := range f.attempts {
					if a != i+1 {
						t.Errorf("round %d ran as attempt %d", i+1, a)
					}
				}
				if took < tc.pause[0] || took > tc.pause[1] {
					t.Errorf("the call took %v, want between %v and %v of backoff", took, tc.pause[0], tc.pause[1])
				}
				switch {
				case tc.want == nil && (err != nil || !ok):
					t.Errorf("Complete = %v, %v; want true", ok, err)
				case tc.want != nil && (!errors.Is(err, tc.want) || ok || !strings.Contains(err.Error(), tc.text)):
					t.Errorf("Complete = %v, %v; want false and %v, saying %q", ok, err, tc.want, tc.text)
				}
			})
		})
	}
}

// Every pause lies between half and all of its step: 10 ms doubled per
// attempt, at most 500 ms.
func TestPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for attempt, step := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 4: 80 * time.Millisecond, 6: 320 * time.Millisecond, 7: 500 * time.Millisecond, 12: 500 * time.Millisecond} {
			for range 50 {
				start := time.Now()
				if err := pause(t.Context(), attempt); err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); took < step/2 || took > step {
					t.Fatalf("pause after attempt %d took %v, want between %v and %v", attempt, took, step/2, step)
				}
			}
		}
	})
}

// A context that ends during a pause ends the call, with the context's
// error in the chain even when the round's error does not carry it.
func TestOpsStopWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o, f := newOps()
		c := mustWin(t, o, t.Context(), "k")
		f.attempts = nil
		ctx, cancel := context.WithCancel(t.Context())
		f.fail = func(int) (error, bool) { return errBusy, false }
		go func() {
			time.Sleep(time.Millisecond) // within the first pause (at least 5 ms)
			cancel()
		}()
		ok, err := o.Complete(ctx, c)
		if ok || !errors.Is(err, context.Canceled) || !errors.Is(err, errBusy) || len(f.attempts) != 1 {
			t.Fatalf("Complete cancelled in its pause = %v, %v after %d rounds; want the cancellation and the round's error after one", ok, err, len(f.attempts))
		}

		// A round that fails because the context ended is not retried.
		ctx, cancel = context.WithCancel(t.Context())
		f.attempts = nil
		f.fail = func(int) (error, bool) { cancel(); return errMoved, false }
		err = o.Release(ctx, c)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errMoved) || len(f.attempts) != 1 {
			t.Fatalf("Release whose context ended in its round = %v after %d rounds; want the cancellation after one", err, len(f.attempts))
		}
		// An error that already carries the context's is not wrapped twice.
		ctx, cancel = context.WithCancel(t.Context())
		f.fail = func(int) (error, bool) { cancel(); return context.Canceled, false }
		err = o.Release(ctx, c)
		if want := `teststore: Release "k": context canceled`; err == nil || err.Error() != want {
			t.Fatalf("Release = %v, want %q", err, want)
		}
		cancel()
		if err := pause(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("pause on an ended context = %v, want context.Canceled", err)
		}
	})
}
