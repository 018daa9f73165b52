package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemgate/idemgate/store"
)

// The Linearizable case drives one store from several clients at once with
// Claim, Complete, Release and Extend (and, on a store.Failer, Fail and
// Retry) on a few hot keys, records when each
// call started and returned and what it answered, and asks porcupine whether
// some order of the calls, each taking effect at one instant inside its own
// interval, explains every answer under the transition table (spec.go).
// The other cases check each rule alone; this one checks that the rules
// still hold while calls on one key overlap.
const (
	linClients = 8 // concurrent callers
	linSlots   = 3 // hot keys at any time
	// linWindow bounds how long clients keep starting new calls, so that a
	// slow store records a shorter history instead of a slower test: the
	// Google emulators answer a few dozen to a few hundred contended calls
	// a second, SQL servers and Redis thousands.
	linWindow = 2 * time.Second
	// linCheckTimeout bounds porcupine's search. Per-key histories are a
	// few dozen calls, which it checks in milliseconds.
	linCheckTimeout = 10 * time.Second
	// linKept is how many settled claims a client keeps to replay later.
	linKept = 8
)

// defaultLinOps is the default of Config.LinearizabilityOps.
const defaultLinOps = 400

// linearizable is the Linearizable case.
func linearizable(e *env) {
	ops := e.cfg.LinearizabilityOps
	if ops <= 0 {
		ops = defaultLinOps
	}
	d := &linDriver{e: e, maxOps: ops, rec: newRecorder()}
	d.x, _ = e.s.(store.Extender) // without one, no Extend calls (the Extend case reports it)
	d.f, _ = e.s.(store.Failer)   // likewise Fail and Retry
	d.until = time.Now().Add(linWindow)
	var (
		wg    sync.WaitGroup
		errs  = make([]error, linClients)
		start = make(chan struct{})
	)
	for id := range linClients {
		wg.Go(func() {
			<-start
			errs[id] = catch((&linClient{d: d, id: id}).run)
		})
	}
	close(start)
	wg.Wait()
	ran := time.Since(d.rec.start)
	if err := errors.Join(errs...); err != nil {
		// Stores must not fail under contention; an error also leaves the
		// call's effect unknown, which the check below cannot model.
		e.fail("a store call failed under contention: %w", err)
	}
	history := d.rec.history()
	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(linModel(), history, linCheckTimeout)
	e.t.Logf("Linearizable: %d calls (%d overlapping another client's on their key) by %d clients on %d keys in %v, checked in %v: %s",
		len(history), overlapping(history), linClients, d.keys(), ran.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), res)
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		e.fail("porcupine found no verdict for %d calls within %v; lower Config.LinearizabilityOps",
			len(history), linCheckTimeout)
	}
	e.check(e.violation(history, info))
}

// linDriver is what the clients of one Linearizable run share.
type linDriver struct {
	e      *env
	x      store.Extender // nil when the store has no Extend
	f      store.Failer   // nil when the store keeps no failures
	rec    *recorder
	maxOps int
	until  time.Time // no new calls are started after it
	// gens numbers the current key of each slot. A key that is DONE
	// answers AlreadyDone for the hour its record lives (and a FAILED one
	// AlreadyFailed until it is retried), so the first client to see that
	// moves its slot to a fresh key.
	gens  [linSlots]atomic.Int64
	count atomic.Int64 // keys used beyond the first of each slot
}

// more reports whether a client may start another round of calls.
func (d *linDriver) more() bool {
	return d.rec.len() < d.maxOps && time.Now().Before(d.until)
}

func (d *linDriver) keys() int { return linSlots + int(d.count.Load()) }

// linClient is one caller. Its calls are sequential; porcupine tells the
// clients apart by id.
type linClient struct {
	d      *linDriver
	id     int
	tokens int           // fixed tokens used so far; numbers the next
	old    []store.Claim // claims this client won and settled
}

// run issues rounds of calls until the driver's budget is spent. Each round
// either replays a settled claim, whose fence the store must refuse or, for
// a completed or failed claim, confirm, or plays an operator who retries a
// hot key whatever its state, or claims a hot key and, when it wins, plays
// the holder to the end. A FAILED key is retried, as an operator would, or
// given up for a fresh one.
func (c *linClient) run() {
	for c.d.more() {
		if len(c.old) > 0 && rand.IntN(4) == 0 {
			c.replay(c.old[rand.IntN(len(c.old))])
			continue
		}
		slot := rand.IntN(linSlots)
		gen := c.d.gens[slot].Load()
		key := fmt.Sprintf("lin-%d-%d", slot, gen)
		if c.d.f != nil && rand.IntN(6) == 0 {
			c.retry(key)
			continue
		}
		token := ""
		if rand.IntN(2) == 0 {
			// Fix the token so that this client can retry the Claim. It is
			// used for this claim only, never after the claim is settled.
			c.tokens++
			token = fmt.Sprintf("c%d-t%d", c.id, c.tokens)
		}
		got := c.claim(key, token)
		if got.Status == store.AlreadyFailed && rand.IntN(4) != 0 {
			// An operator retries the key, and the delivery that found
			// it FAILED comes again at once.
			c.retry(key)
			got = c.claim(key, token)
		}
		switch got.Status {
		case store.AlreadyDone, store.AlreadyFailed:
			if c.d.gens[slot].CompareAndSwap(gen, gen+1) {
				c.d.count.Add(1)
			}
		case store.Won:
			c.hold(got, token)
		}
	}
}

// hold plays the winner of cl: it may retry the Claim and extend the lease,
// then it always completes, releases or fails it, because an abandoned
// claim would keep its key for the hour-long lease; and it may call once
// more with the settled claim, as a late duplicate would, always when the
// claim failed for good (the calls a FAILED record must refuse).
func (c *linClient) hold(cl store.Claim, token string) {
	for range rand.IntN(3) {
		if token != "" && (c.d.x == nil || rand.IntN(2) == 0) {
			c.claim(cl.Key, token) // a retry must re-affirm
		} else if c.d.x != nil {
			c.extend(cl)
		}
	}
	failed := false
	switch c.settle() {
	case opComplete:
		c.complete(cl)
	case opRelease:
		c.release(cl)
	default:
		failed = c.fail(cl)
	}
	c.old = append(c.old, cl)
	if len(c.old) > linKept {
		c.old = c.old[1:]
	}
	switch {
	case failed && rand.IntN(2) == 0:
		// The Complete a careless holder makes after its work failed
		// for good: the FAILED record must refuse it.
		c.complete(cl)
	case failed || rand.IntN(2) == 0:
		// A late call right after the settle, while the key is most
		// likely still contended: released, or just reclaimed.
		c.replay(cl)
	}
}

// settle chooses how a holder settles its claim: Complete or Release,
// or, on a store.Failer, Fail as often as both together, so that failures
// add up on a key before it is DONE.
func (c *linClient) settle() opKind {
	ops := []opKind{opComplete, opRelease, opFail, opFail}
	if c.d.f == nil {
		ops = ops[:2]
	}
	return ops[rand.IntN(len(ops))]
}

// replay calls Complete, Release, Extend or Fail with a claim that was
// settled.
func (c *linClient) replay(cl store.Claim) {
	ops := []opKind{opComplete, opRelease}
	if c.d.x != nil {
		ops = append(ops, opExtend)
	}
	if c.d.f != nil {
		ops = append(ops, opFail)
	}
	switch ops[rand.IntN(len(ops))] {
	case opComplete:
		c.complete(cl)
	case opRelease:
		c.release(cl)
	case opExtend:
		c.extend(cl)
	default:
		c.fail(cl)
	}
}

// The calls below each make one store call (Claim with a long lease) and
// record it. A failed call is not recorded: the client stops with its
// error.

func (c *linClient) claim(key, token string) store.Claim {
	in := linCall{op: opClaim, key: key, token: token}
	start := c.d.rec.now()
	got, err := c.d.e.s.Claim(c.d.e.ctx, key, long, store.ClaimOptions{Token: token})
	c.check(in, err)
	c.d.rec.add(c.id, in, linResult{status: got.Status, fence: got.Fence, attempts: got.Attempts}, start)
	return got
}

func (c *linClient) complete(cl store.Claim) {
	in := linCall{op: opComplete, key: cl.Key, fence: cl.Fence}
	start := c.d.rec.now()
	ok, err := c.d.e.s.Complete(c.d.e.ctx, cl)
	c.check(in, err)
	c.d.rec.add(c.id, in, linResult{ok: ok}, start)
}

func (c *linClient) release(cl store.Claim) {
	in := linCall{op: opRelease, key: cl.Key, fence: cl.Fence}
	start := c.d.rec.now()
	c.check(in, c.d.e.s.Release(c.d.e.ctx, cl))
	c.d.rec.add(c.id, in, linResult{}, start)
}

func (c *linClient) extend(cl store.Claim) {
	in := linCall{op: opExtend, key: cl.Key, fence: cl.Fence}
	start := c.d.rec.now()
	got, err := c.d.x.Extend(c.d.e.ctx, cl, long)
	out := linResult{fence: got.Fence}
	if errors.Is(err, store.ErrFenced) {
		out = linResult{fenced: true}
	} else {
		c.check(in, err)
	}
	c.d.rec.add(c.id, in, out, start)
}

// fail fails cl, and reports whether the record is FAILED: for good one
// time in three, and otherwise counted, under no budget or a budget of
// two or three, so that the failures of successive holders add up to it.
func (c *linClient) fail(cl store.Claim) bool {
	in := linCall{op: opFail, key: cl.Key, fence: cl.Fence, final: rand.IntN(3) == 0}
	if !in.final {
		in.max = []int{0, 2, 3}[rand.IntN(3)]
	}
	start := c.d.rec.now()
	n, failed, err := c.d.f.Fail(c.d.e.ctx, cl, store.Failure{Reason: "lin", Final: in.final, MaxAttempts: in.max})
	c.check(in, err)
	c.d.rec.add(c.id, in, linResult{ok: failed, attempts: n}, start)
	return failed
}

func (c *linClient) retry(key string) {
	in := linCall{op: opRetry, key: key}
	start := c.d.rec.now()
	ok, err := c.d.f.Retry(c.d.e.ctx, key)
	c.check(in, err)
	c.d.rec.add(c.id, in, linResult{ok: ok}, start)
}

// check ends the client's run if its call failed.
func (c *linClient) check(in linCall, err error) {
	if err != nil {
		c.d.e.fail("client %d on key %s: %s: %w", c.id, in.key, describeCall(in), err)
	}
}

// overlapping counts the calls that ran at the same time as a call of
// another client on the same key: the calls whose order the store, not the
// clients, decided.
func overlapping(history []porcupine.Operation) int {
	n := 0
	for _, ops := range partitionByKey(history) {
		for i, a := range ops {
			for j, b := range ops {
				if i != j && a.ClientId != b.ClientId && a.Call <= b.Return && b.Call <= a.Return {
					n++
					break
				}
			}
		}
	}
	return n
}

// recorder collects a history. It is safe for concurrent use.
type recorder struct {
	start time.Time  // instants are monotonic nanoseconds since start
	mu    sync.Mutex // guards ops
	ops   []porcupine.Operation
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

// add records a call that started at start and returns now.
func (r *recorder) add(client int, in linCall, out linResult, start int64) {
	end := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: start, Output: out, Return: end})
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

func (r *recorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}
