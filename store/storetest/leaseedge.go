package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/store"
)

// The LeaseEdgeTakeovers case races Claims on a few keys whose holders
// never complete, with leases so short that each lapses while the next
// Claims are in flight: key after key is taken over at the very edge of a
// lease. A store that decides a takeover on more than one clock reading
// (the test per field, each on a fresh reading) writes, at that edge, a
// record that is half the old claim and half the new one. The case sees
// such a record through the port only:
//
//   - two Won claims with one fence (the new token with the old fence);
//   - a Won fence not above a fence that a call finished before this one
//     began had already seen;
//   - a HeldByOther whose LeaseUntil is not the lease of the claim that
//     won its fence (the old holder with the new lease);
//   - a takeover whose lease began before the lease it replaced ended
//     (the takeover decided on one reading, its lease counted from an
//     earlier one);
//   - a retried Claim with a winner's token that re-affirms its fence with
//     another lease;
//   - a holder taken over whose Complete still succeeds, or whose Extend is
//     not fenced.
//
// On a fake clock the clock steps forward on every reading, so that time
// passes inside an operation that reads it more than once. On a real clock
// the leases are Config.EdgeLease long. The case runs until every key has
// been taken over edgeTakeovers times, or edgeBudget has passed; it fails
// if a key was never taken over. A Claim that fails (a store may give up
// under contention) breaks no rule, but its outcome is unknown, so the
// checks that need every winner seen are skipped for its key.

const (
	edgeKeys    = 3
	edgeWorkers = 3 // per key
	// edgeSteps is the lease, in clock steps, on a fake clock.
	edgeSteps = 10
	// edgeSpread varies the leases: the i-th Claim of a worker asks for
	// the lease plus i%edgeSpread clock steps (milliseconds on a real
	// clock).
	edgeSpread = 5
	// edgeTakeovers is how many takeovers of each key end the race: more
	// on a fake clock, where they cost no waiting.
	edgeTakeoversReal = 3
	edgeTakeoversFake = 4
	edgeBudget        = 30 * time.Second
	// edgeZombies caps the taken-over holders whose Complete and Extend
	// are tried once the race is over, per key.
	edgeZombies = 8
)

// edgeKey is what the race saw of one key.
type edgeKey struct {
	name string
	// seen is the highest fence of any call that has returned.
	seen atomic.Int64
	// errs counts Claims that returned an error: a store may give up
	// under contention (the Google stores retry five times), and such a
	// call may still have won, unseen.
	errs atomic.Int64
	mu   sync.Mutex // guards the fields below
	wins map[int64]edgeWin
	held []store.Claim
	err  error // the first broken rule
}

// fail keeps the first broken rule.
func (k *edgeKey) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil && err != nil {
		k.err = err
	}
}

func (k *edgeKey) failed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err != nil
}

// takeovers counts the wins after the first.
func (k *edgeKey) takeovers() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return max(len(k.wins)-1, 0)
}

// saw raises seen to fence.
func (k *edgeKey) saw(fence int64) {
	for {
		cur := k.seen.Load()
		if fence <= cur || k.seen.CompareAndSwap(cur, fence) {
			return
		}
	}
}

// edgeWin is a Won claim and the lease it asked for.
type edgeWin struct {
	store.Claim
	lease time.Duration
}

// won records a Won claim with a fresh token: its fence must be new.
func (e *env) won(k *edgeKey, c store.Claim, lease time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if prev, ok := k.wins[c.Fence]; ok && prev.Token != c.Token {
		e.fail("Claim(%q) = Won fence %d with token %s, and so did another Claim with token %s: two owners of one fence (a takeover decided on more than one clock reading?)",
			k.name, c.Fence, c.Token, prev.Token)
	}
	k.wins[c.Fence] = edgeWin{c, lease}
}

func leaseEdgeTakeovers(e *env) {
	lease, unit, want := e.cfg.EdgeLease, time.Millisecond, edgeTakeoversReal
	if lease <= 0 {
		lease = e.tick
	}
	if !e.real {
		const step = time.Millisecond
		lease, unit, want = edgeSteps*step, step, edgeTakeoversFake
		e.mu.Lock()
		e.step = step
		e.mu.Unlock()
		defer func() {
			e.mu.Lock()
			e.step = 0
			e.mu.Unlock()
		}()
	}
	keys := make([]*edgeKey, edgeKeys)
	for i := range keys {
		keys[i] = &edgeKey{name: fmt.Sprintf("edge-%d", i), wins: map[int64]edgeWin{}}
	}
	deadline := time.Now().Add(edgeBudget)
	var wg sync.WaitGroup
	race := func(k *edgeKey) {
		for w := range edgeWorkers {
			wg.Go(func() {
				for i := 0; k.takeovers() < want && !k.failed() && time.Now().Before(deadline); i++ {
					// Leases of varied length move the instant each one
					// lapses across the readings of the Claims racing it.
					l := lease + time.Duration(i%edgeSpread)*unit
					k.fail(catch(func() { e.edgeClaim(k, fmt.Sprintf("%s-w%d-%d", k.name, w, i), l) }))
				}
			})
		}
	}
	for _, k := range keys {
		race(k)
		if !e.real {
			// One key at a time: the clock steps for every reading, and
			// a lease should lapse inside a Claim of its own key.
			wg.Wait()
		}
	}
	wg.Wait()
	tolerance := time.Duration(0)
	if e.real {
		tolerance = time.Millisecond // stores round leases to milliseconds
	}
	for _, k := range keys {
		e.check(k.err)
		e.expect(len(k.wins) >= 2, "key %q was never taken over in %v of racing Claims with %v leases (%d Claims failed): the case tested nothing", k.name, edgeBudget, lease, k.errs.Load())
		e.edgeAfter(k, tolerance)
	}
}

// edgeClaim makes one Claim with a fresh token, checks its answer against
// what earlier calls saw, and retries it once with the same token.
func (e *env) edgeClaim(k *edgeKey, token string, lease time.Duration) {
	opts := store.ClaimOptions{Token: token}
	floor := k.seen.Load()
	c, err := e.s.Claim(e.ctx, k.name, lease, opts)
	if err != nil {
		k.errs.Add(1)
		return
	}
	defer k.saw(c.Fence)
	switch c.Status {
	case store.Won:
		e.expect(c.Token == token, "Claim(%q) = Won with token %q, want the caller's %q", k.name, c.Token, token)
		e.expect(c.Fence > floor, "Claim(%q) = Won fence %d, but a call that returned before it began had seen fence %d: a new claim's fence must rise above every fence before it", k.name, c.Fence, floor)
		e.won(k, c, lease)
	case store.HeldByOther:
		e.expect(c.Fence >= floor, "Claim(%q) = HeldByOther fence %d, but a call that returned before it began had seen fence %d: the fence went back", k.name, c.Fence, floor)
		k.mu.Lock()
		k.held = append(k.held, c)
		k.mu.Unlock()
		return
	default:
		e.fail("Claim(%q) = %v while nobody completed, want Won or HeldByOther", k.name, c.Status)
	}
	// A retry with the winner's token: it re-affirms the claim as it was
	// won, unless another Claim has taken the key over since.
	floor = k.seen.Load()
	r, err := e.s.Claim(e.ctx, k.name, lease, opts)
	if err != nil {
		k.errs.Add(1)
		return
	}
	defer k.saw(r.Fence)
	switch {
	case r.Fence < c.Fence:
		e.fail("retried Claim(%q) = %v fence %d, below the fence %d it won: the fence went back", k.name, r.Status, r.Fence, c.Fence)
	case r.Status == store.Won && r.Fence == c.Fence:
		e.expect(r.LeaseUntil.Equal(c.LeaseUntil) && r.Token == token, "retried Claim(%q) re-affirmed fence %d with LeaseUntil %v token %q, but it was won with LeaseUntil %v token %q: a re-affirm must not change the claim",
			k.name, r.Fence, r.LeaseUntil, r.Token, c.LeaseUntil, token)
	case r.Status == store.Won:
		e.expect(r.Fence > floor, "retried Claim(%q) = Won fence %d, not above fence %d seen before it began", k.name, r.Fence, floor)
		e.won(k, r, lease) // taken over and lapsed since, then won anew
	case r.Status == store.HeldByOther && r.Fence == c.Fence:
		e.fail("retried Claim(%q) = HeldByOther fence %d, the fence it won: another token holds the winner's fence", k.name, r.Fence)
	case r.Status == store.HeldByOther:
		k.mu.Lock()
		k.held = append(k.held, r)
		k.mu.Unlock()
	default:
		e.fail("retried Claim(%q) = %v while nobody completed, want Won or HeldByOther", k.name, r.Status)
	}
}

// edgeAfter checks, once the race is over, what only the whole history
// shows: every HeldByOther reported the lease of the claim that won its
// fence, every holder taken over is fenced out, and the last one completes.
func (e *env) edgeAfter(k *edgeKey, tolerance time.Duration) {
	for _, h := range k.held {
		w, ok := k.wins[h.Fence]
		if !ok && k.errs.Load() == 0 {
			e.fail("Claim(%q) = HeldByOther fence %d, a fence that no Claim won: the record mixes two claims", k.name, h.Fence)
		}
		if ok && !h.LeaseUntil.Equal(w.LeaseUntil) {
			e.fail("Claim(%q) = HeldByOther fence %d LeaseUntil %v, but the Claim that won fence %d got LeaseUntil %v: the record mixes two claims",
				k.name, h.Fence, h.LeaseUntil, w.Fence, w.LeaseUntil)
		}
	}
	var top int64
	for f, w := range k.wins {
		top = max(top, f)
		// A takeover decides on the instant the lease it replaces has
		// lapsed, and the new lease counts from that instant.
		prev, ok := k.wins[f-1]
		if ok && w.LeaseUntil.Add(-w.lease).Before(prev.LeaseUntil.Add(-tolerance)) {
			e.fail("Claim(%q) = Won fence %d with LeaseUntil %v, a %v lease that began before fence %d's lease ended at %v: the takeover and its lease come from different clock readings",
				k.name, f, w.LeaseUntil, w.lease, f-1, prev.LeaseUntil)
		}
	}
	x, _ := e.s.(store.Extender)
	for f := top - 1; f > 0 && f >= top-edgeZombies; f-- {
		z, ok := k.wins[f]
		if !ok {
			continue
		}
		e.complete(z.Claim, false, fmt.Sprintf("Complete by the holder of fence %d of %q, taken over by fence %d, must return false", f, k.name, top))
		if x != nil {
			e.extendFenced(x, z.Claim, fmt.Sprintf("by the holder of fence %d of %q, taken over by fence %d", f, k.name, top))
		}
	}
	if k.errs.Load() > 0 {
		return // a failed Claim may have taken the last winner over
	}
	// Nobody took the last winner's key over: its late Complete commits.
	e.complete(k.wins[top].Claim, true, fmt.Sprintf("Complete by the last winner of %q (fence %d), never taken over, must return true", k.name, top))
}
