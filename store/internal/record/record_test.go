package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// The transitions are checked end to end by storetest against the
// emulator; these cases pin the details storetest cannot see: what is
// written (nil means nothing) and how the skew margin moves each guard.

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestClaimTransitions(t *testing.T) {
	p := Rules{TTL: time.Hour, Skew: 2 * time.Second}
	lease := time.Minute
	kept := []byte("kept")
	held := &Record{State: StateClaimed, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Fingerprint: kept, Origin: "push/a"}
	released := &Record{State: StateClaimed, Fence: 4, Token: "", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour)}
	done := &Record{State: StateDone, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0, Fingerprint: kept, Origin: "push/a"}
	for _, tc := range []struct {
		name      string
		r         *Record
		token     string
		fp        []byte // the caller's fingerprint
		now       time.Time
		want      store.Status
		wantFence int64 // 0 for a write: store.FenceAt of the old fence at now
		writes    bool
	}{
		{"absent", nil, "b", []byte("new"), t0, store.Won, 0, true},
		{"absent, no fingerprint", nil, "b", nil, t0, store.Won, 0, true},
		{"held", held, "b", []byte("new"), t0.Add(-time.Second), store.HeldByOther, 3, false},
		{"lapsed within the margin", held, "b", nil, t0.Add(time.Second), store.HeldByOther, 3, false},
		{"lapsed past the margin", held, "b", []byte("new"), t0.Add(2 * time.Second), store.Won, 0, true},
		{"lapsed, taken without a fingerprint", held, "b", nil, t0.Add(2 * time.Second), store.Won, 0, true},
		{"same token", held, "a", []byte("new"), t0.Add(time.Hour / 2), store.Won, 3, false},
		{"released", released, "b", []byte("new"), t0.Add(-time.Minute), store.Won, 0, true},
		{"released, same token", released, "", nil, t0, store.Won, 0, true},
		{"done", done, "b", []byte("new"), t0.Add(time.Second), store.AlreadyDone, 3, false},
		{"done, same token", done, "a", nil, t0.Add(time.Second), store.AlreadyDone, 3, false},
		{"expired past the margin", done, "b", []byte("new"), t0.Add(2 * time.Second), store.Won, 0, true},
		{"expired, reclaimed without a fingerprint", done, "b", nil, t0.Add(2 * time.Second), store.Won, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, next, write := p.Claim(tc.r, "k", func() string { return tc.token }, tc.fp, string(tc.fp), lease, tc.now)
			wantFence := tc.wantFence
			if tc.writes {
				var old int64
				if tc.r != nil {
					old = tc.r.Fence
				}
				wantFence = store.FenceAt(old, tc.now.UnixMicro())
			}
			if c.Status != tc.want || c.Fence != wantFence {
				t.Fatalf("claim = %v fence %d, want %v fence %d", c.Status, c.Fence, tc.want, wantFence)
			}
			if write != tc.writes {
				t.Fatalf("claim writes = %v, want %v", write, tc.writes)
			}
			if write {
				if next.Token != tc.token || !next.LeaseUntil.Equal(tc.now.Add(lease)) || !next.ExpiresAt.Equal(tc.now.Add(lease+p.TTL)) {
					t.Fatalf("claim wrote %+v", next)
				}
				if !c.LeaseUntil.Equal(next.LeaseUntil) || c.Token != next.Token {
					t.Fatalf("claim returned %+v but wrote %+v", c, next)
				}
			}
			if c.Status == store.HeldByOther && (!c.LeaseUntil.Equal(tc.r.LeaseUntil) || c.Token != "") {
				t.Fatalf("HeldByOther = %+v, want the holder's lease and no token", c)
			}
			// A write keeps the caller's fingerprint, even none; otherwise
			// the record's is returned.
			wantFP := tc.fp
			if !write {
				wantFP = tc.r.Fingerprint
			} else if !bytes.Equal(next.Fingerprint, tc.fp) {
				t.Fatalf("claim wrote fingerprint %q, want the caller's %q", next.Fingerprint, tc.fp)
			}
			if !bytes.Equal(c.Fingerprint, wantFP) {
				t.Fatalf("claim returned fingerprint %q, want %q", c.Fingerprint, wantFP)
			}
			// The origin goes as the fingerprint goes (the cases pass the
			// fingerprint's text as the caller's origin).
			wantOrigin := string(tc.fp)
			if !write {
				wantOrigin = tc.r.Origin
			} else if next.Origin != string(tc.fp) {
				t.Fatalf("claim wrote origin %q, want the caller's %q", next.Origin, tc.fp)
			}
			if c.Origin != wantOrigin {
				t.Fatalf("claim returned origin %q, want %q", c.Origin, wantOrigin)
			}
		})
	}
}

func TestSettleTransitions(t *testing.T) {
	p := Rules{TTL: time.Hour, Skew: time.Second}
	fp := []byte("fp")
	claimed := &Record{State: StateClaimed, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Fingerprint: fp, Origin: "pull/m-1"}
	done := &Record{State: StateDone, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Fingerprint: fp, Origin: "pull/m-1"}
	now := t0.Add(time.Minute) // the lease has lapsed: no operation here looks at it

	own := store.Claim{Key: "k", Status: store.Won, Fence: 3, Token: "a"}
	at := func(fence int64, token string) store.Claim {
		return store.Claim{Key: "k", Status: store.Won, Fence: fence, Token: token}
	}
	if ok, next, write := p.Complete(claimed, own, now); !ok || !write || next.State != StateDone || !next.ExpiresAt.Equal(now.Add(p.TTL)) || next.Fence != 3 || !bytes.Equal(next.Fingerprint, fp) {
		t.Errorf("complete of the holder's claim = %v, %+v", ok, next)
	} else if !next.LeaseUntil.Equal(now) || next.Origin != claimed.Origin {
		t.Errorf("complete of the holder's claim = %+v, want the lease ended at the completion %v and the origin %q kept", next, now, claimed.Origin)
	}
	if ok, next, write := p.Complete(done, own, now); !ok || write {
		t.Errorf("complete retried on DONE = %v, %+v; want true, no write", ok, next)
	}
	if ok, next, write := p.Complete(claimed, at(2, "a"), now); ok || write {
		t.Errorf("complete with a stale fence = %v, %+v; want false, no write", ok, next)
	}
	if ok, next, write := p.Complete(claimed, at(3, "b"), now); ok || write {
		t.Errorf("complete with the fence and another token = %v, %+v; want false, no write", ok, next)
	}
	if ok, _, _ := p.Complete(done, own, t0.Add(time.Hour+time.Second)); ok {
		t.Error("complete of an expired record must return false")
	}

	next, write := p.Release(claimed, own, now)
	if !write || next.Fence != now.UnixMicro() || next.Token != "" || !next.LeaseUntil.Equal(now) || next.State != StateClaimed || next.Fingerprint != nil || !next.ExpiresAt.Equal(now.Add(p.TTL)) {
		t.Errorf("release = %+v, want fence %d (now in microseconds), no token, leaseUntil now, no fingerprint, expiry a ttl from now", next, now.UnixMicro())
	}
	if next.Origin != claimed.Origin {
		t.Errorf("release = %+v, want the last holder's origin %q kept", next, claimed.Origin)
	}
	for _, r := range []*Record{nil, done} {
		if next, write := p.Release(r, own, now); write {
			t.Errorf("release of %+v wrote %+v", r, next)
		}
	}
	if next, write := p.Release(claimed, at(2, "a"), now); write {
		t.Errorf("release with a stale fence wrote %+v", next)
	}
	if next, write := p.Release(claimed, at(3, "b"), now); write {
		t.Errorf("release with the fence and another token wrote %+v", next)
	}
	// An expiry further away than a ttl stays.
	far := *claimed
	far.ExpiresAt = t0.Add(5 * time.Hour)
	if next, write := p.Release(&far, own, now); !write || !next.ExpiresAt.Equal(far.ExpiresAt) {
		t.Errorf("release = %+v, want the expiry %v kept", next, far.ExpiresAt)
	}
	// A fence that ran ahead of the clock still rises by one.
	ahead := *claimed
	ahead.Fence = now.UnixMicro() + 10
	if next, write := p.Release(&ahead, at(ahead.Fence, "a"), now); !write || next.Fence != ahead.Fence+1 {
		t.Errorf("release of a fence ahead of the clock = %+v, want fence %d", next, ahead.Fence+1)
	}

	c := own
	got, next, err := p.Extend(claimed, c, 2*time.Hour, now)
	if err != nil || !next.LeaseUntil.Equal(now.Add(2*time.Hour)) || !next.ExpiresAt.Equal(now.Add(3*time.Hour)) || got.Fence != 3 || got.Token != "a" || !bytes.Equal(next.Fingerprint, fp) {
		t.Errorf("extend = %+v, %+v, %v", got, next, err)
	}
	far = *claimed
	far.ExpiresAt = t0.Add(5 * time.Hour) // an earlier, longer extension
	if _, next, _ := p.Extend(&far, c, time.Second, now); !next.ExpiresAt.Equal(far.ExpiresAt) {
		t.Errorf("a short extend moved expiresAt back to %v from %v", next.ExpiresAt, far.ExpiresAt)
	}
	for _, r := range []*Record{nil, done} {
		if _, _, err := p.Extend(r, c, time.Minute, now); !errors.Is(err, store.ErrFenced) {
			t.Errorf("extend of %+v = %v, want ErrFenced", r, err)
		}
	}
	if _, _, err := p.Extend(claimed, at(3, "b"), time.Minute, now); !errors.Is(err, store.ErrFenced) {
		t.Errorf("extend with the fence and another token = %v, want ErrFenced", err)
	}
}

func TestMicro(t *testing.T) {
	in := time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)
	if got := (Rules{}).kept(in); got.Nanosecond() != 123456000 {
		t.Fatalf("kept(%v) = %v, want microseconds kept and the rest dropped", in, got)
	}
}

func TestCompleteTx(t *testing.T) {
	o := Ops{Name: "teststore", Rules: Rules{TTL: time.Hour}}
	claimed := Record{State: StateClaimed, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour)}
	// step runs decide on r a minute past its lease (no matter to a
	// completion) and keeps what decide would write.
	step := func(r *Record, wrote **Record) Step {
		return func(key string, decide Decide) error {
			*wrote = decide(r, t0.Add(time.Minute))
			return nil
		}
	}
	var wrote *Record
	if err := o.CompleteTx(store.Claim{Key: "k", Status: store.Won, Fence: 3, Token: "a"}, step(&claimed, &wrote)); err != nil || wrote == nil || wrote.State != StateDone {
		t.Errorf("CompleteTx of the holder's claim = %v, wrote %+v; want nil and DONE", err, wrote)
	}
	wrote = nil
	if err := o.CompleteTx(store.Claim{Key: "k", Status: store.Won, Fence: 2, Token: "a"}, step(&claimed, &wrote)); !errors.Is(err, store.ErrFenced) || wrote != nil {
		t.Errorf("CompleteTx with a stale fence = %v, wrote %+v; want ErrFenced and no write", err, wrote)
	}
	if err := o.CompleteTx(store.Claim{Key: "k", Status: store.Won, Fence: 3, Token: "b"}, step(&claimed, &wrote)); !errors.Is(err, store.ErrFenced) || wrote != nil {
		t.Errorf("CompleteTx with the fence and another token = %v, wrote %+v; want ErrFenced and no write", err, wrote)
	}
	called := false
	err := o.CompleteTx(store.Claim{Key: "", Status: store.Won, Fence: 1}, func(string, Decide) error { called = true; return nil })
	if !errors.Is(err, store.ErrFenced) || called {
		t.Errorf("CompleteTx of an invalid key = %v (step called: %v); want ErrFenced without a read", err, called)
	}
	boom := errors.New("lookup failed")
	err = o.CompleteTx(store.Claim{Key: "k", Status: store.Won, Fence: 3, Token: "a"}, func(string, Decide) error { return boom })
	if !errors.Is(err, boom) || errors.Is(err, store.ErrFenced) || !strings.HasPrefix(err.Error(), "teststore: CompleteTx ") {
		t.Errorf("CompleteTx over a failed read = %v; want the read's error, wrapped, not ErrFenced", err)
	}
	done := claimed
	done.State = StateDone
	wrote = nil
	if err := o.CompleteTx(store.Claim{Key: "k", Status: store.Won, Fence: 3, Token: "a"}, step(&done, &wrote)); !errors.Is(err, store.ErrFenced) || wrote != nil {
		t.Errorf("CompleteTx of the holder's claim on its DONE record = %v, wrote %+v; want ErrFenced and no write", err, wrote)
	}
	called = false
	err = o.CompleteTx(store.Claim{Key: "k", Status: store.HeldByOther, Fence: 3}, func(string, Decide) error { called = true; return nil })
	if !errors.Is(err, store.ErrNotWon) || errors.Is(err, store.ErrFenced) || called {
		t.Errorf("CompleteTx of a claim held by another = %v (step called: %v); want ErrNotWon without a read", err, called)
	}
}

// A Claim draws its token only when the token counts: not for a DONE
// record, once for a held one (to compare) and once for a win.
func TestClaimDrawsTheTokenOnlyWhenItCounts(t *testing.T) {
	p := Rules{TTL: time.Hour}
	held := &Record{State: StateClaimed, Fence: 3, Token: "a", LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}
	done := &Record{State: StateDone, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour)}
	released := &Record{State: StateClaimed, Fence: 4, LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour)}
	for _, tc := range []struct {
		name  string
		r     *Record
		draws int
	}{
		{"absent", nil, 1},
		{"done", done, 0},
		{"held", held, 1},
		{"released", released, 1},
	} {
		draws := 0
		c, next, write := p.Claim(tc.r, "k", func() string { draws++; return "b" }, nil, "", time.Minute, t0)
		if draws != tc.draws {
			t.Errorf("%s: the token was drawn %d times, want %d", tc.name, draws, tc.draws)
		}
		if write && (c.Token != "b" || next.Token != "b") {
			t.Errorf("%s: a win = %+v, wrote %+v; want the drawn token", tc.name, c, next)
		}
	}
}

// The guards are strict: a lease ending at now is over, an expiry at now
// has passed; the skew margin moves both by exactly its length.
func TestClaimBoundaries(t *testing.T) {
	for _, skew := range []time.Duration{0, time.Second} {
		p := Rules{TTL: time.Hour, Skew: skew}
		held := &Record{State: StateClaimed, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0.Add(time.Minute)}
		done := &Record{State: StateDone, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0}
		token := func() string { return "b" }
		for _, tc := range []struct {
			name string
			r    *Record
			now  time.Time
			want store.Status
		}{
			{"held, a nanosecond before the lease ends", held, t0.Add(skew - 1), store.HeldByOther},
			{"held, as the lease ends", held, t0.Add(skew), store.Won},
			{"done, a nanosecond before expiry", done, t0.Add(skew - 1), store.AlreadyDone},
			{"done, at expiry", done, t0.Add(skew), store.Won},
		} {
			if c, _, _ := p.Claim(tc.r, "k", token, nil, "", time.Minute, tc.now); c.Status != tc.want {
				t.Errorf("skew %v, %s: Claim = %v, want %v", skew, tc.name, c.Status, tc.want)
			}
		}
		own := store.Claim{Key: "k", Status: store.Won, Fence: 3, Token: "a"}
		if ok, _, _ := p.Complete(held, own, t0.Add(time.Minute+skew-1)); !ok {
			t.Errorf("skew %v: Complete a nanosecond before expiry must succeed", skew)
		}
		if ok, _, _ := p.Complete(held, own, t0.Add(time.Minute+skew)); ok {
			t.Errorf("skew %v: Complete at expiry must fail", skew)
		}
		if _, _, err := p.Extend(held, own, time.Minute, t0.Add(time.Minute+skew)); !errors.Is(err, store.ErrFenced) {
			t.Errorf("skew %v: Extend at expiry = %v, want ErrFenced", skew, err)
		}
		if _, write := p.Release(held, own, t0.Add(time.Minute+skew)); write {
			t.Errorf("skew %v: Release at expiry must write nothing", skew)
		}
	}
}

// Exact keeps nanoseconds; by default times are cut to the microsecond.
// Neither keeps a monotonic clock reading.
func TestExactKeepsNanoseconds(t *testing.T) {
	now := time.Now() // with a monotonic reading
	lease := time.Minute + 1234*time.Nanosecond
	for _, exact := range []bool{false, true} {
		p := Rules{TTL: time.Hour, Exact: exact}
		want := now.Add(lease).Round(0)
		if !exact {
			want = want.Truncate(time.Microsecond)
		}
		c, next, _ := p.Claim(nil, "k", func() string { return "t" }, nil, "", lease, now)
		if c.LeaseUntil != want || next.ExpiresAt != p.kept(want.Add(p.TTL)) {
			t.Errorf("exact %v: Claim leases until %v, expires %v; want %v, a ttl later", exact, c.LeaseUntil, next.ExpiresAt, want)
		}
		if got := p.kept(now); exact && got != now.Round(0) {
			t.Errorf("exact: kept(now) = %v, want %v: the nanoseconds, no monotonic reading", got, now.Round(0))
		}
	}
}

// View hands out a copy of the fingerprint: an operator's change to it
// cannot reach the record.
func TestViewCopiesTheFingerprint(t *testing.T) {
	p := Rules{TTL: time.Hour}
	r := &Record{State: StateClaimed, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Fingerprint: []byte("abc")}
	v, ok := p.View(r, "k", t0)
	if !ok || string(v.Fingerprint) != "abc" || v.State != store.Claimed || v.Token != "a" || !v.CompletedAt.IsZero() || !v.LeaseUntil.Equal(t0) || !v.ExpiresAt.Equal(t0.Add(time.Hour)) || v.Key != "k" || v.Fence != 3 {
		t.Fatalf("View = %+v, %v", v, ok)
	}
	v.Fingerprint[0] = 'x'
	if string(r.Fingerprint) != "abc" {
		t.Fatalf("changing the view's fingerprint changed the record's to %q", r.Fingerprint)
	}
	if v, _ := p.View(&Record{State: StateClaimed, Fence: 1, Token: "a", ExpiresAt: t0.Add(time.Hour)}, "k", t0); v.Fingerprint != nil {
		t.Fatalf("View of a record without a fingerprint = %q, want nil", v.Fingerprint)
	}
}
