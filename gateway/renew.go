package gateway

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemgate/idemgate/internal/seedrand"
	"github.com/idemgate/idemgate/store"
)

// ErrLeaseLost is the cause (see context.Cause) of the cancellation of a
// body's context when the gateway could not keep its claim: the key was
// taken over, or the store could not be reached to renew the lease before
// it ended. The body should stop: its completion will not be recorded,
// even if it returns nil (Lock then returns this cause).
var ErrLeaseLost = errors.New("gateway: lease lost")

// minRenewedLease is the shortest lease the gateway will renew: renewals
// happen every third of it and each must reach the store in time.
const minRenewedLease = 50 * time.Millisecond

// renew starts renewing c's lease for the body about to run, when the
// store can renew claims; otherwise it returns nil, a renewal whose
// methods do nothing but give the body its claim. claimedAt is when the
// Claim was sent: the lease counts from there on the local monotonic
// clock, which never runs ahead of the store.
//
// Renewal lasts until end: past the body, while its completion is
// recorded. The caller's context ending (a client gone, a push deadline,
// Receive shutting down) cancels the body's context but not the renewal,
// because the body may go on regardless (a call that takes no context),
// and a lapsed lease would let a redelivery run the same work beside it.
// Only a lost claim cancels the body from here, and a body handing its
// claim to a transaction (store.EnterTx) ends the renewal early.
func (g *Gateway) renew(ctx context.Context, c store.Claim, claimedAt time.Time, sc scope) *renewal {
	if g.ext == nil {
		return nil
	}
	bctx, cancel := context.WithCancelCause(ctx)
	r := &renewal{
		claimCtx: claimCtx{Context: bctx},
		g:        g, cancel: cancel, c: c, sc: sc,
		// The first renewal counts from the Claim's sending, as the
		// lease does, so that a slow Claim leaves the renewal its margin.
		due:      claimedAt.Add(g.renewInterval(ctx)),
		deadline: claimedAt.Add(g.opts.Lease),
	}
	r.claimCtx.claim = store.OnEnterTx(c, r)
	g.renewals.add(r)
	return r
}

// bodyCtx is the context the body runs on, derived from ctx: it carries
// the claim, and can be cancelled by the renewal.
func (r *renewal) bodyCtx(ctx context.Context, c store.Claim) context.Context {
	if r == nil {
		return withClaim(ctx, c)
	}
	return &r.claimCtx
}

// lost returns the cause (matching ErrLeaseLost) with which the renewal
// cancelled the body's context, if it did: the body ran without its claim
// for a while, and returning nil must not get it recorded done.
func (r *renewal) lost() error {
	if r == nil {
		return nil
	}
	if err := context.Cause(&r.claimCtx); errors.Is(err, ErrLeaseLost) {
		return err
	}
	return nil
}

// settling marks the body returned: a claim lost from here on is told by
// Complete's answer, and the body is not cancelled for it.
func (r *renewal) settling() {
	if r == nil {
		return
	}
	s := r.g.renewals
	s.mu.Lock()
	r.returned = true
	s.mu.Unlock()
}

// end stops the renewal and releases the body's context. It may be called
// more than once.
func (r *renewal) end() {
	if r == nil {
		return
	}
	r.g.renewals.stop(r)
	r.cancel(nil)
}

// EnteredTx ends the renewal without waiting: the body is completing its
// claim inside a transaction of its own (store.EnterTx), which from now on
// decides whether the work commits. A renewal would queue behind that
// transaction's lock on the record, or abort it, and the lease no longer
// guards anything a takeover could break: see store.EnterTx.
func (r *renewal) EnteredTx() {
	s := r.g.renewals
	s.mu.Lock()
	s.halt(r)
	s.mu.Unlock()
}

// renewInterval is a third of the lease, jittered by ±10% so that many
// holders do not renew in step. The jitter comes from the source a
// simulation put in ctx (internal/seedrand), else the global one.
func (g *Gateway) renewInterval(ctx context.Context) time.Duration {
	l := g.opts.Lease
	return l/3 + time.Duration(seedrand.Int64N(ctx, int64(l/15)+1)) - l/30
}

// renewal is one live claim under renewal. It is also the body's context,
// so that a claim costs one allocation beside its cancellable context.
type renewal struct {
	claimCtx // the body's context; never changes
	g        *Gateway
	sc       scope // where a lost claim is logged
	cancel   context.CancelCauseFunc
	inflight sync.WaitGroup // a renew call in progress

	// Guarded by the scheduler's mu.
	index    int       // in the scheduler's heap; -1 when not queued
	due      time.Time // when to renew next
	c        store.Claim
	deadline time.Time          // when the lease ends, on the local clock
	abort    context.CancelFunc // cancels the Extend in flight, if any
	stopped  bool
	returned bool // the body returned: see settling
}

// scheduler renews the claims of one Gateway from a heap ordered by due
// time and a single timer set for the earliest, so that a claim costs no
// timer and no goroutine until its first renewal is due. Each renewal then
// runs on a goroutine of its own, so a slow store delays only its claim.
//
// The zero scheduler is ready. It holds a timer only while it has claims
// to renew, or, outside a synctest bubble, until that timer fires: inside a
// bubble the timer is fake, and is dropped as soon as the heap empties so
// that no timer outlives the bubble's claims. One Gateway may thus serve
// many bubbles in turn, but not live claims of two clocks at once.
type scheduler struct {
	mu    sync.Mutex // guards the fields below and the renewals' guarded fields
	heap  renewalHeap
	timer *time.Timer
	fake  bool      // timer runs on a synctest bubble's clock
	armed bool      // timer is set and has not fired
	when  time.Time // when an armed timer fires
}

// add queues r for its first renewal.
func (s *scheduler) add(r *renewal) {
	s.mu.Lock()
	s.queue(r, time.Now())
	s.mu.Unlock()
}

// queue puts r in the heap, and sets the timer again if r is now the
// first due and the timer would fire too late for it. Called with s.mu
// held.
func (s *scheduler) queue(r *renewal, now time.Time) {
	heap.Push(&s.heap, r)
	if s.heap[0] == r && s.late(r.due) {
		s.arm(now, r.due)
	}
}

// late reports whether the timer would fire after due: then it must be
// set again. Most claims end long before their first renewal, so the timer
// is left set for the earliest claim ever queued and fires to find it
// gone, rather than being moved on each claim. Called with s.mu held.
func (s *scheduler) late(due time.Time) bool { return !s.armed || due.Before(s.when) }

// arm makes the timer fire at due. Called with s.mu held.
func (s *scheduler) arm(now, due time.Time) {
	if s.timer == nil {
		// A time from a synctest bubble carries no monotonic reading.
		s.fake = now == now.Round(0)
		s.timer = time.AfterFunc(due.Sub(now), s.fire)
	} else {
		s.timer.Reset(due.Sub(now))
	}
	s.armed, s.when = true, due
}

// stop ends r's renewals. An Extend in flight is cancelled rather than
// waited for to its own deadline, which may be most of a lease away: the
// body's answer must not wait on a slow store for a lease it no longer
// needs. stop returns once that call has returned.
func (s *scheduler) stop(r *renewal) {
	s.mu.Lock()
	s.halt(r)
	s.mu.Unlock()
	r.inflight.Wait()
}

// halt ends r's renewals, as stop does, but does not wait for an Extend in
// flight. Called with s.mu held.
func (s *scheduler) halt(r *renewal) {
	r.stopped = true
	if r.index >= 0 {
		heap.Remove(&s.heap, r.index)
	}
	if r.abort != nil {
		r.abort()
	}
	if len(s.heap) == 0 && s.fake && s.timer != nil {
		s.timer.Stop()
		s.timer, s.armed = nil, false
	}
}

// fire runs on the timer: it starts the renewals now due and sets the timer
// for the next one.
func (s *scheduler) fire() {
	now := time.Now()
	var due []*renewal
	s.mu.Lock()
	s.armed = false
	for len(s.heap) > 0 && !s.heap[0].due.After(now) {
		r := heap.Pop(&s.heap).(*renewal)
		r.inflight.Add(1)
		due = append(due, r)
	}
	if len(s.heap) > 0 {
		s.arm(now, s.heap[0].due)
	}
	s.mu.Unlock()
	for i, r := range due {
		if i == len(due)-1 {
			r.renew() // this goroutine is the timer's own
		} else {
			go r.renew()
		}
	}
}

// renew extends r's lease, and queues its next renewal, or cancels the body
// when the claim is lost or about to lapse unrenewed. r.inflight was added
// to by the caller.
func (r *renewal) renew() {
	defer r.inflight.Done()
	s := r.g.renewals
	s.mu.Lock()
	if r.stopped {
		s.mu.Unlock()
		return
	}
	c, deadline, lease := r.c, r.deadline, r.g.opts.Lease
	// Give up early enough to cancel the body before the lease ends. The
	// caller's cancellation does not reach Extend: see run. A renewal that
	// comes late (after a Claim that took most of the lease) still gets a
	// real attempt, of a tenth of the lease: the store may well answer, and
	// an Extend failed unsent would cancel a body that has just begun.
	giveUp := deadline.Add(-lease / 6)
	try := giveUp
	if late := time.Now().Add(lease / 10); try.Before(late) {
		try = late
	}
	ectx, ecancel := context.WithDeadline(context.WithoutCancel(&r.claimCtx), try)
	r.abort = ecancel
	s.mu.Unlock()

	sent := time.Now()
	nc, err := r.g.ext.Extend(ectx, c, lease)
	r.g.tel.timed(&r.claimCtx, opExtend, sent)
	completed := errors.Is(err, store.ErrFenced) && r.g.doneUnder(ectx, c)
	ecancel()

	s.mu.Lock()
	r.abort = nil
	if r.stopped {
		s.mu.Unlock()
		return
	}
	now := time.Now()
	var lost error
	switch {
	case completed:
		// The body recorded the key done itself, in its own transaction
		// (a store's CompleteTx): nothing is left to renew, nothing lost.
		s.mu.Unlock()
		return
	case err == nil:
		r.c, r.deadline = nc, sent.Add(lease)
		r.due = now.Add(r.g.renewInterval(&r.claimCtx))
	case errors.Is(err, store.ErrFenced):
		lost = fmt.Errorf("%w: the key was taken over or released", ErrLeaseLost)
	default:
		// Retry sooner as the end nears, but not in ever smaller steps:
		// below a fiftieth of the lease there is no time left to retry.
		retry := min(lease/10, giveUp.Sub(now)/2)
		if retry < lease/50 {
			lost = fmt.Errorf("%w: could not renew before the lease ended", ErrLeaseLost)
		}
		r.due = now.Add(retry)
	}
	if lost == nil {
		s.queue(r, now)
	}
	returned := r.returned
	s.mu.Unlock()

	// Log and cancel outside the lock, which every claim of the Gateway
	// shares; stop waits for this call, so the body still runs.
	switch {
	case lost != nil && returned:
		// Complete's answer tells the rest.
		r.sc.logAttrs(&r.claimCtx, slog.LevelWarn, "idemgate: claim lost while its completion was being recorded",
			r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), r.g.errorAttr(c.Key, err))
	case lost != nil:
		r.sc.logAttrs(&r.claimCtx, slog.LevelError, "idemgate: claim lost while the work ran; cancelling it",
			r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), r.g.errorAttr(c.Key, err))
		r.cancel(lost)
	case err != nil:
		r.sc.logAttrs(&r.claimCtx, slog.LevelWarn, "idemgate: lease renewal failed; retrying",
			r.g.keyAttr(c.Key), slog.Int64("fence", c.Fence), r.g.errorAttr(c.Key, err))
	}
}

// doneUnder reports whether c's record is DONE under c's own fence, when
// the store can tell (it has store.Inspector's Inspect): an Extend that found no CLAIMED
// record then met the body's own completion, not a takeover.
func (g *Gateway) doneUnder(ctx context.Context, c store.Claim) bool {
	in, ok := g.st.(reader)
	if !ok {
		return false
	}
	rec, ok, err := in.Inspect(ctx, c.Key)
	return err == nil && ok && rec.State == store.Done && rec.Fence == c.Fence
}

// renewalHeap orders the queued renewals by due time for container/heap.
// Each renewal keeps its index, so that a stopped claim leaves the heap in
// O(log n). Used with the scheduler's mu held.
type renewalHeap []*renewal

func (h renewalHeap) Len() int           { return len(h) }
func (h renewalHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }

func (h renewalHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *renewalHeap) Push(x any) {
	r := x.(*renewal)
	r.index = len(*h)
	*h = append(*h, r)
}

func (h *renewalHeap) Pop() any {
	old := *h
	n := len(old) - 1
	r := old[n]
	old[n] = nil
	*h = old[:n]
	r.index = -1
	return r
}
