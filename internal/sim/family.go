package sim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"google.golang.org/api/idtoken"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushauth"
	"github.com/idemgate/idemgate/store"
)

// The rules of the families added for a record's whole life, pull
// ordering, Mutex and push authentication; see docs/testing.md.
const (
	ruleFence  = "fence"  // a key's claim won at a fence not above an earlier one
	ruleZombie = "zombie" // a lost claim's Extend, Release, Complete or CompleteTx took effect, or its ledger write was accepted
	ruleOrder  = "order"  // a message of an ordering key effected before an earlier one still not done
	ruleMutex  = "mutex"  // two live Mutex bodies of one entity at once
	ruleAuth   = "auth"   // a forged request ran a body, changed a record or was answered 2xx
	// ruleSwallowed: a Mutex or nested Lock whose body failed inside it
	// reported something else (success).
	ruleSwallowed = "swallowed"
)

// wonSoFar returns how many claims of key were won so far: a Claim sent
// now must win above each of them.
func (w *world) wonSoFar(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.won[key])
}

// claimWon checks claim c, just won by a Claim sent when before claims of
// its key had been won: its fence is above each of theirs, whatever
// deleted the record in between; a retried Claim that re-affirms the same
// claim is no new one. Claims won while c's call was in flight are
// concurrent with it: their replies may come in either order at one fake
// instant, so they are not compared.
func (w *world) claimWon(d *delivery, c store.Claim, before int) {
	w.mu.Lock()
	prev := w.won[c.Key]
	var bad *store.Claim
	for i := range prev[:before] {
		p := prev[i]
		if p.Token == c.Token && p.Fence == c.Fence {
			continue
		}
		if c.Fence <= p.Fence {
			bad = &p
			break
		}
	}
	w.won[c.Key] = append(prev, c)
	w.mu.Unlock()
	if bad != nil {
		w.violateKey(c.Key, ruleFence, fmt.Sprintf("a claim won at fence %d (%s), not above the fence %d of an earlier claim of the key: fences must rise, whatever deleted the record", c.Fence, whoOf(d), bad.Fence))
	}
}

func whoOf(d *delivery) string {
	if d == nil {
		return "no delivery"
	}
	return d.who()
}

// purge deletes the store's expired records every lease, until the run
// ends.
func (w *world) purge() {
	defer w.all.Done()
	for w.sleep(w.t.Lease) {
		if err := w.b.Purge(w.root); err != nil && w.root.Err() == nil {
			w.tracef(nil, "purge: %v", err)
		}
	}
}

// probeLostClaim is the zombie's return: its process stalled past lease +
// ttl, and the key may have been claimed anew on a deleted record. If its
// claim c is lost, every operation of c on the store must fail or do
// nothing: Extend fails, Release leaves another live claim alone,
// Complete answers false, CompleteTx commits nothing.
func (w *world) probeLostClaim(ctx context.Context, d *delivery, c store.Claim) {
	ctx = context.WithoutCancel(ctx)
	before, live, err := w.insp.Inspect(ctx, c.Key)
	if err != nil {
		w.tracef(d, "zombie: the record cannot be read: %v", err)
		return
	}
	if live && before.State == store.Claimed && before.Fence == c.Fence && before.Token == c.Token {
		w.tracef(d, "zombie: still owns its claim (fence %d): nobody took the key over", c.Fence)
		return
	}
	w.mu.Lock()
	d.lost = true
	w.mu.Unlock()
	w.tracef(d, "zombie: its claim (fence %d) is lost; the record is %s", c.Fence, w.describe(before, live))
	if _, err := w.ext.Extend(ctx, c, leaseOf(w.sc, w.t)); err == nil {
		w.violate(d, ruleZombie, fmt.Sprintf("Extend of the lost claim of fence %d succeeded on a record that was %s", c.Fence, w.describe(before, live)))
	}
	// Another live claim is held by a body still at work: a Release of
	// ours must leave it be.
	holderRuns := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for o := range w.key(c.Key).running {
			if o.claim.Token == before.Token && o.claim.Fence == before.Fence {
				return true
			}
		}
		return false
	}
	held := live && before.State == store.Claimed && before.Token != "" && holderRuns()
	relErr := w.b.Store.Release(ctx, c)
	after, live2, err := w.insp.Inspect(ctx, c.Key)
	// The live holder may have completed its claim meanwhile (in its
	// transaction, with CompleteTx): DONE under its fence is its doing.
	completed := live2 && after.State == store.Done && after.Fence == before.Fence
	if err == nil && held && holderRuns() && !completed && (!live2 || after.Token != before.Token || after.Fence != before.Fence) {
		w.violate(d, ruleZombie, fmt.Sprintf("Release of the lost claim of fence %d (it answered %v) freed the live claim of fence %d: the record is now %s", c.Fence, relErr, before.Fence, w.describe(after, live2)))
	}
	if ok, err := w.b.Store.Complete(ctx, c); ok {
		w.violate(d, ruleZombie, fmt.Sprintf("Complete of the lost claim of fence %d answered true (error %v) on a record that was %s", c.Fence, err, w.describe(before, live)))
	}
	if w.b.Tx != nil {
		// Count the effects of the lost claim's own fence: the key's new
		// holder may commit its effect meanwhile, as it should.
		err := w.b.Tx.Commit(ctx, c)
		n, cerr := w.b.Tx.Effects(ctx, c.Key, c.Fence)
		if cerr != nil {
			w.violate(d, ruleHarness, "counting the effects of "+c.Key+": "+cerr.Error())
		}
		if err == nil || n != 0 {
			w.violate(d, ruleZombie, fmt.Sprintf("CompleteTx of the lost claim of fence %d answered %v, and the sink holds %d effects of that fence", c.Fence, err, n))
		}
	}
	w.tracef(d, "zombie: Extend, Release, Complete%s of its lost claim changed nothing", map[bool]string{true: ", CompleteTx", false: ""}[w.b.Tx != nil])
}

// checkZombieWrite: a lost claim's ledger write, accepted, must not come
// after an effect of a claim that won the key after it.
func (w *world) checkZombieWrite(d *delivery, c store.Claim) {
	w.mu.Lock()
	lost := d.lost
	w.mu.Unlock()
	if !lost {
		return
	}
	w.led.mu.Lock()
	var later []int64
	for i, tok := range w.led.tokens[c.Key] {
		if tok != c.Token && w.led.at[c.Key][i].After(d.start) {
			later = append(later, w.led.fences[c.Key][i])
		}
	}
	w.led.mu.Unlock()
	if len(later) > 0 {
		w.violate(d, ruleZombie, fmt.Sprintf("the ledger accepted the lost claim's write at fence %d after the effects of later claims at fences %v", c.Fence, later))
	}
}

// mutexEffect is the body's effect inside g.Mutex on its entity, with its
// work before the effect (Wait) inside too, so that the entity stays busy
// a while.
func (w *world) mutexEffect(ctx context.Context, d *delivery, c store.Claim) error {
	ent := "po:" + w.b.Prefix + d.ms.m.Customer
	ran := false
	err := d.proc.g.Mutex(ctx, ent, func(mctx context.Context) error {
		w.mutexStarts(d, ent)
		defer w.mutexEnds(d, ent)
		if d.a.Inner {
			ran = true
			w.failed(d)
			w.tracef(d, "body fails inside its Mutex on %s", ent)
			return errInner
		}
		if d.a.Wait > 0 {
			if err := w.busy(mctx, d, d.a.Wait); err == errBailedNil {
				return nil
			} else if err != nil {
				return err
			}
		}
		if d.proc.crashed() {
			return w.dead(d)
		}
		return w.effect(mctx, d, c)
	})
	w.noteText(d, "Mutex's error", err)
	if ran && !errors.Is(err, errInner) {
		w.violate(d, ruleSwallowed, fmt.Sprintf("Mutex returned %v for a body that failed inside it, not the body's error", err))
	}
	if errors.Is(err, gateway.ErrInProgress) {
		w.mu.Lock()
		d.busy, d.contended = true, true
		w.mu.Unlock()
		w.tracef(d, "body's Mutex on %s meets a live holder: %v", ent, err)
	} else if err != nil {
		w.tracef(d, "body's Mutex on %s: %v", ent, err)
	}
	return err
}

func (w *world) mutexStarts(d *delivery, ent string) {
	w.mu.Lock()
	m := w.inMutex[ent]
	if m == nil {
		m = map[*delivery]bool{}
		w.inMutex[ent] = m
	}
	var others []string
	for o := range m {
		if !o.frozen {
			others = append(others, o.who())
		}
	}
	m[d] = true
	w.mu.Unlock()
	w.tracef(d, "Mutex body of %s starts", ent)
	if len(others) > 0 {
		slices.Sort(others)
		w.violate(d, ruleMutex, fmt.Sprintf("a Mutex body of %s starts while %v still runs", ent, others))
	}
}

func (w *world) mutexEnds(d *delivery, ent string) {
	w.mu.Lock()
	delete(w.inMutex[ent], d)
	w.mu.Unlock()
}

// The push authentication of the simulated subscription.
const (
	authAudience = "https://orders.sim/push"
	authEmail    = "push@sim.iam.gserviceaccount.com"
)

var (
	genuineToken = jwt("genuine")
	forgedToken  = jwt("forged")
)

// jwt is a well-formed RS256 token (its signature is no signature): the
// validator, not its shape, tells the genuine one from a forgery.
func jwt(sig string) string {
	part := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return part(map[string]any{"alg": "RS256", "kid": "sim", "typ": "JWT"}) + "." +
		part(map[string]any{"iss": "https://accounts.google.com", "aud": authAudience, "email": authEmail, "email_verified": true, "exp": int64(1) << 40}) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(sig))
}

// simValidator accepts the genuine token only, as Google's keys would.
type simValidator struct{}

func (simValidator) Validate(_ context.Context, token, _ string) (*idtoken.Payload, error) {
	if token != genuineToken {
		return nil, errors.New("sim: the signature does not verify")
	}
	return &idtoken.Payload{Issuer: "https://accounts.google.com", Audience: authAudience, Expires: int64(1) << 40,
		Claims: map[string]any{"email": authEmail, "email_verified": true}}, nil
}

func (w *world) verifier() *pushauth.Verifier {
	v, err := pushauth.New(&pushauth.Options{Audience: authAudience, ServiceAccountEmail: authEmail,
		Validator: simValidator{}, Logger: w.logs.logger()})
	if err != nil {
		panic("sim: pushauth.New: " + err.Error())
	}
	return v
}

// forge sends a forged push request for ms to the process of a: it must be
// refused without running the body or touching the record.
func (w *world) forge(ms *msgState, a *Attempt) {
	p := w.process(a.Instance)
	d := &delivery{w: w, ms: ms, a: a, proc: p, start: time.Now(), forged: true}
	ctx := withDelivery(w.root, d)
	bg := context.Background()
	// The key is quiet when no genuine delivery is in flight at either
	// read, nor started and ended between them (a message sharing the
	// business key, at the same instant).
	flying, begun := w.flying(ms.key)
	before, live, err1 := w.insp.Inspect(bg, ms.key)
	body, err := json.Marshal(map[string]any{"message": w.wireMessage(ms.m), "subscription": subscription, "deliveryAttempt": a.N})
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if a.Forged == forgedBadToken {
		req.Header.Set("Authorization", "Bearer "+forgedToken)
	}
	rec := httptest.NewRecorder()
	p.auth.ServeHTTP(rec, req)
	after, live2, err2 := w.insp.Inspect(bg, ms.key)
	flying2, begun2 := w.flying(ms.key)
	quiet := flying == 0 && flying2 == 0 && begun == begun2
	w.tracef(d, "forged request (%s) answered %d", map[forgery]string{forgedNoToken: "no token", forgedBadToken: "refused token"}[a.Forged], rec.Code)
	if rec.Code >= 200 && rec.Code <= 299 {
		w.violate(d, ruleAuth, fmt.Sprintf("a forged request was answered %d", rec.Code))
	}
	if quiet && err1 == nil && err2 == nil && (live != live2 || live && !sameRecord(before, after)) {
		w.violate(d, ruleAuth, fmt.Sprintf("a forged request changed the record from %s to %s", w.describe(before, live), w.describe(after, live2)))
	}
}

func sameRecord(a, b store.Record) bool {
	return a.State == b.State && a.Fence == b.Fence && a.Token == b.Token && a.LeaseUntil.Equal(b.LeaseUntil) &&
		bytes.Equal(a.Fingerprint, b.Fingerprint)
}

// flying counts key's deliveries whose answer is still to come, and those
// that ever started.
func (w *world) flying(key string) (inflight, begun int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inflight[key], w.begun[key]
}

// publishAt is how long after the start m is published.
func (w *world) publishAt(m *Message) time.Duration {
	at := time.Duration(m.At * float64(w.t.Lease))
	if m.Late {
		at += w.t.lateAfter()
	}
	return at
}

// publishOrdered is Pub/Sub and the client's scheduler for a scenario
// whose messages carry ordering keys: one goroutine per key.
func (w *world) publishOrdered() {
	byKey := map[string][]*msgState{}
	var keys []string
	for _, ms := range w.msgs {
		k := ms.m.OrderingKey
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], ms)
	}
	for _, k := range keys {
		q := byKey[k]
		slices.SortStableFunc(q, func(a, b *msgState) int { return cmp.Compare(a.m.At, b.m.At) })
		w.all.Add(1)
		go w.orderedKey(q)
	}
}

// orderedKey delivers the messages of one ordering key, q in publish
// order, as Pub/Sub and the client's scheduler do: Pub/Sub hands the
// client the key's messages published so far from the first one not yet
// acknowledged on; the client runs them one after another, the next as
// soon as the callback of the previous returned, whether it acked or
// nacked; after a round with a nack, Pub/Sub redelivers from the first
// message not acknowledged, after a backoff. A message's attempts count
// towards the dead-letter topic as usual.
func (w *world) orderedKey(q []*msgState) {
	defer w.all.Done()
	start := time.Now()
	attempts := map[*msgState]int{}
	backoff := w.t.minBackoff()
	for {
		first := -1
		for i, ms := range q {
			if !ms.isSettled(w) {
				first = i
				break
			}
		}
		if first < 0 {
			return
		}
		if !w.sleep(time.Until(start.Add(w.publishAt(q[first].m)))) {
			return
		}
		nacked := false
		for _, ms := range q[first:] {
			if time.Since(start) < w.publishAt(ms.m) {
				break // not yet published: the next round
			}
			if ms.isSettled(w) {
				continue
			}
			attempts[ms]++
			n := attempts[ms]
			if n > w.t.maxAttempts() {
				w.mu.Lock()
				if !ms.acked && !ms.dead {
					ms.dead = true
					close(ms.settled)
				}
				w.mu.Unlock()
				w.tracef(nil, "pubsub: message %s dead-lettered after %d attempts", ms.m.ID, w.t.maxAttempts())
				continue
			}
			a := drawAttempt(w.sc, w.t, ms.m, n, false)
			if a.copy != nil {
				// The copy goes first, to another subscriber, as a
				// redelivery while an earlier delivery still works does:
				// this attempt then meets its key held, and must not let
				// the key's later messages overtake it.
				w.all.Add(1)
				go func() {
					defer w.all.Done()
					w.deliver(ms, a.copy)
				}()
				if !w.sleep(a.CopyAfter / 10) {
					return
				}
			}
			d, answer := w.deliver(ms, a)
			deadline := time.NewTimer(w.t.ackDeadline())
			acked := false
			select {
			case acked = <-answer:
			case <-deadline.C:
				w.mu.Lock()
				d.late = true
				w.mu.Unlock()
				w.tracef(d, "pubsub: no answer within the ack deadline; the client moves on")
			case <-w.end:
				deadline.Stop()
				return
			}
			deadline.Stop()
			if !acked {
				nacked = true
			}
		}
		if !nacked {
			backoff = w.t.minBackoff()
			// Wait for the next message to be published.
			if !w.sleep(w.t.minBackoff()) {
				return
			}
			continue
		}
		if !w.sleep(backoff) {
			return
		}
		backoff = min(max(2*backoff, w.t.minBackoff()), w.t.maxBackoff())
	}
}

// checkOrder: as d writes its effect, every earlier message of its
// ordering key is done (its effect written), dead-lettered, or met a real
// failure (a failure Pub/Sub lets later messages overtake, as it does). An
// earlier message only held (another delivery of it at work) must not be
// overtaken.
func (w *world) checkOrder(d *delivery) {
	m := d.ms.m
	if m.OrderingKey == "" || d.a.Copy {
		return
	}
	var behind []string
	for _, o := range w.msgs {
		if o == d.ms || o.m.OrderingKey != m.OrderingKey || o.m.At >= m.At {
			continue
		}
		w.mu.Lock()
		dead, real := o.dead, false
		for _, a := range o.attempts {
			if a.a.injectedFailure() || a.struck || a.refused || a.late || a.metFailure() {
				real = true
			}
		}
		w.mu.Unlock()
		if dead || real || w.effects(o.key) > 0 {
			continue
		}
		behind = append(behind, o.m.ID)
	}
	if len(behind) > 0 {
		w.violate(d, ruleOrder, fmt.Sprintf("message %s of ordering key %s is effected before the earlier %v, not done and with no real failure", m.ID, m.OrderingKey, behind))
	}
}
