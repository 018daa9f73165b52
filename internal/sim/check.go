package sim

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idemgate/idemgate/store"
)

// The rules a run is checked by; see docs/testing.md, "Model and rules".
const (
	ruleAckDone     = "ack-done"
	ruleAckFenced   = "ack-fenced" // ack-done, by a body fenced out with nobody else holding the key
	ruleAckEffect   = "ack-effect"
	ruleConcurrent  = "concurrent"
	ruleLapsedStart = "lapsed-start"
	ruleRepeat      = "repeat"
	ruleLost        = "lost"
	ruleDeadLetter  = "dead-letter"
	ruleHideKeys    = "hidekeys"
	ruleUnsettled   = "unsettled"
	ruleHarness     = "harness" // the simulation itself went wrong
	// Issue 30's reaches.
	ruleInstant   = "instant"    // a store call at the instant its contract turns answered as on the other side
	ruleAckFailed = "ack-failed" // a delivery whose body failed was acked
	ruleUndone    = "undone"     // work acked undone (SPEC section 3) on a store that did not fail, nobody holding the key
	ruleStop      = "stop"       // a body started on a Claim sent once its pull Receive had stopped
	rulePanic     = "panic"      // a panic other than http.ErrAbortHandler came out of a push handler
)

// Violation is one broken rule.
type Violation struct {
	Rule string
	Key  string // the store key it concerns; empty for none
	At   time.Duration
	Text string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s [%s] key %q: %s", fmtDur(v.At), v.Rule, v.Key, v.Text)
}

// traceLine is one line of the trace.
type traceLine struct {
	at   time.Duration
	key  string // "" for events of no key
	text string
}

// ledger is the fence-checking sink of the bodies' effects: it refuses a
// fence lower than the highest it has accepted for the key.
type ledger struct {
	mu     sync.Mutex
	fences map[string][]int64 // accepted fences by key, in order
	// The claim token and the instant of each accepted write, by key:
	// the checker's, not the ledger's.
	tokens map[string][]string
	at     map[string][]time.Time
}

func (l *ledger) write(key string, c store.Claim) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fences == nil {
		l.fences, l.tokens, l.at = map[string][]int64{}, map[string][]string{}, map[string][]time.Time{}
	}
	fs := l.fences[key]
	if len(fs) > 0 && c.Fence < slices.Max(fs) {
		return fmt.Errorf("sim ledger: fence %d is below %d: %w", c.Fence, slices.Max(fs), store.ErrFenced)
	}
	l.fences[key] = append(fs, c.Fence)
	l.tokens[key] = append(l.tokens[key], c.Token)
	l.at[key] = append(l.at[key], time.Now())
	return nil
}

func (l *ledger) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.fences[key])
}

// effects counts key's effects, in the ledger or the transactional sink.
func (w *world) effects(key string) int {
	if w.b.Tx != nil {
		n, err := w.b.Tx.Effects(context.Background(), key, 0)
		if err != nil {
			w.violate(nil, ruleHarness, "counting the effects of "+key+": "+err.Error())
		}
		return n
	}
	return w.led.count(key)
}

// tracef adds a line to the trace, for d's key (d may be nil).
func (w *world) tracef(d *delivery, format string, args ...any) {
	e := traceLine{at: w.now(), text: fmt.Sprintf(format, args...)}
	if d != nil {
		e.key = d.ms.key
		e.text = d.who() + ": " + e.text
	}
	w.mu.Lock()
	w.events = append(w.events, e)
	w.mu.Unlock()
}

// violate records a broken rule about d's key (d may be nil).
func (w *world) violate(d *delivery, rule, text string) {
	key := ""
	if d != nil {
		key = d.ms.key
	}
	w.violateKey(key, rule, text)
}

func (w *world) violateKey(key, rule, text string) {
	v := Violation{Rule: rule, Key: key, At: w.now(), Text: text}
	w.mu.Lock()
	w.violations = append(w.violations, v)
	w.events = append(w.events, v.line())
	w.mu.Unlock()
}

// line is v's line in the trace.
func (v Violation) line() traceLine {
	return traceLine{at: v.At, key: v.Key, text: "VIOLATION [" + v.Rule + "] " + v.Text}
}

// bodyStarts checks a body as it starts under claim c: no other live body
// runs for its key, and c's lease has not passed on the store's clock.
func (w *world) bodyStarts(d *delivery, c store.Claim) {
	w.mu.Lock()
	d.ran, d.claim = true, c
	stopped := d.claimStopped
	ks := w.key(d.ms.key)
	var others []string
	// A body whose Claim began before a Forget of the key ended may have
	// had its claim freed by it (the Forget may be applied after the
	// Claim, whichever body registers first): it runs as a zombie, beside
	// which the next claim may run.
	freed := func(o *delivery) bool { return ks.forgetsBegun > o.forgetsAtClaim }
	for o := range ks.running {
		if freed(o) {
			delete(ks.running, o)
			o.frozen, o.struck = true, true
			continue
		}
		others = append(others, fmt.Sprintf("%s (fence %d)", o.who(), o.claim.Fence))
	}
	onFailed := w.checkFailedStart(d, c)
	switch {
	case freed(d):
		d.frozen, d.struck, others = true, true, nil
	case d.proc.crashed(): // a claim won just before its process crashed
		d.frozen, others = true, nil
	default:
		ks.running[d] = true
	}
	w.mu.Unlock()
	w.tracef(d, "body starts, fence %d, lease until %s", c.Fence, fmtDur(c.LeaseUntil.Sub(w.start)))
	if onFailed != "" {
		w.violate(d, ruleFailedRun, onFailed)
	}
	if stopped {
		w.violate(d, ruleStop, fmt.Sprintf("body with fence %d starts on a Claim sent once its pull Receive had stopped", c.Fence))
	}
	if len(others) > 0 {
		slices.Sort(others)
		w.violate(d, ruleConcurrent, fmt.Sprintf("body with fence %d starts while %s still runs", c.Fence, strings.Join(others, ", ")))
	}
	// On a real store the lease is on the server's clock, on this host
	// too, read a few milliseconds apart: a tenth of the lease of slack.
	slack := time.Duration(0)
	if !w.b.Fake {
		slack = w.t.Lease / 10
	}
	if !time.Now().Before(c.LeaseUntil.Add(slack)) {
		w.violate(d, ruleLapsedStart, fmt.Sprintf("body starts at %s on a claim whose lease ended at %s", fmtDur(w.now()), fmtDur(c.LeaseUntil.Sub(w.start))))
	}
}

func (w *world) bodyEnds(d *delivery) {
	w.mu.Lock()
	ks := w.key(d.ms.key)
	delete(ks.running, d)
	d.forgetsAtEnd = ks.forgetsBegun
	w.mu.Unlock()
}

// freeze takes d's body out of the concurrency count for good: a stall or
// a crash froze it, and anything it does later is a zombie's. Its key may
// then see its effect twice.
func (w *world) freeze(d *delivery, why string) {
	w.mu.Lock()
	ks := w.key(d.ms.key)
	delete(ks.running, d)
	d.frozen = true
	ks.excused = true
	w.mu.Unlock()
	w.tracef(d, "body %s", why)
}

// describe renders a record for the trace.
func (w *world) describe(rec store.Record, live bool) string {
	if !live {
		return "absent"
	}
	s := fmt.Sprintf("%s fence %d", rec.State, rec.Fence)
	switch {
	case rec.State == store.Done:
	case rec.Released():
		s += " released"
	case rec.Lapsed():
		s += " lapsed"
	default:
		s += fmt.Sprintf(" held until %s", fmtDur(rec.LeaseUntil.Sub(w.start)))
	}
	return s
}

// answered checks d's answer and, if it is a timely ack, settles the
// message.
func (w *world) answered(d *delivery, acked bool, how string) {
	ctx := context.Background()
	key := d.ms.key
	rec, live, err := w.insp.Inspect(ctx, key)
	w.mu.Lock()
	late, ok, wrote, fenced, claim, failed := d.late, d.ok, d.wrote, d.fenced, d.claim, d.failed
	gaveUp := d.gaveUp || d.metFailed
	struck := d.struck || d.frozen
	forgotten := w.key(key).forgotten
	// A Forget begun since the body returned may have freed, after the
	// gateway read it, a record another claim held.
	forgetSince := d.ran && w.key(key).forgetsBegun > d.forgetsAtEnd
	w.mu.Unlock()
	verdict := "nack"
	if acked {
		verdict = "ack"
	}
	if err != nil {
		w.tracef(d, "answer %s: %s; the record cannot be read: %v", how, verdict, err)
		return
	}
	w.tracef(d, "answer %s: %s; record %s", how, verdict, w.describe(rec, live))
	w.checkFailedConflict(d, acked, how)
	if !acked {
		w.mu.Lock()
		if fp := d.ms.fp; fp != nil && live && len(rec.Fingerprint) > 0 && !bytes.Equal(rec.Fingerprint, fp) {
			d.refused = true
		}
		if !d.ran && live && rec.State == store.Claimed && !rec.Released() && !rec.Lapsed() {
			d.held = true
		}
		w.mu.Unlock()
		return
	}
	if gaveUp {
		w.checkFailedAck(d, how, rec, live)
		w.settleAcked(d, late)
		return
	}
	if failed {
		w.violate(d, ruleAckFailed, fmt.Sprintf("acked (%s) a delivery whose body failed: a failure silently acked", how))
	}
	switch {
	case live && rec.State == store.Done:
		if w.effects(key) == 0 {
			w.violate(d, ruleAckEffect, "acked a DONE record whose work was never done: no effect in the sink")
		}
		w.mu.Lock()
		ks := w.key(key)
		ks.sawDone = true
		if rec.ExpiresAt.After(ks.doneUntil) {
			ks.doneUntil = rec.ExpiresAt
		}
		w.mu.Unlock()
	case ok && wrote:
		// SPEC section 3: the body succeeded, Complete could not record it
		// (it failed, or found the claim taken over); the library never
		// asks for a retry of work done.
		w.mu.Lock()
		w.key(key).undoneAck = true
		w.mu.Unlock()
		w.tracef(d, "acked undone: the work is done, its completion was not recorded (SPEC section 3)")
		if w.b.Fake && !struck && d.a.Faults[opComplete].mode == faultNone && live && rec.State == store.Claimed &&
			rec.Fence == claim.Fence && rec.Token == claim.Token && rec.Token != "" {
			// Nothing failed Complete and nobody took the key over: the
			// claim still owns its record, and Complete should have
			// recorded it (it runs on a context the caller's end does not
			// cancel).
			w.violate(d, ruleUndone, fmt.Sprintf("acked (%s) work whose completion was not recorded, though no fault hit Complete and the claim (fence %d) still owns its record", how, claim.Fence))
		}
	case fenced && live && rec.State == store.Claimed && rec.Token != "" && rec.Fence > claim.Fence && rec.ReadAt.Before(rec.LeaseUntil):
		w.tracef(d, "acked fenced out: another live claim (fence %d) holds the key", rec.Fence)
	case fenced && forgetSince:
		w.tracef(d, "acked fenced out; an operator's Forget since its body returned may have freed the claim it saw")
	case fenced:
		w.violate(d, ruleAckFenced, fmt.Sprintf("acked (%s) a body fenced out (store.ErrFenced) while the record is %s: nobody else holds the key", how, w.describe(rec, live)))
	case forgotten:
		// An operator's Forget may have freed the record between the
		// answer and this reading: the guarantee is off for the key.
		w.tracef(d, "acked; the record was forgotten by an operator since")
	case w.doneExpired(d):
		// A duplicate answered by a DONE record that lived out its ttl
		// between the answer and this reading; a new claim may hold the
		// key by now (a Claim whose reply came a lease late, say).
		w.tracef(d, "acked; the DONE record it met expired since")
	case live && rec.State == store.Failed:
		w.violate(d, ruleFailedAck, fmt.Sprintf("acked (%s) as done while the key's record is %s", how, w.describe(rec, live)))
	default:
		w.violate(d, ruleAckDone, fmt.Sprintf("acked (%s) while the record is %s", how, w.describe(rec, live)))
	}
	w.settleAcked(d, late)
}

// settleAcked settles d's message, acked, unless the ack came too late.
func (w *world) settleAcked(d *delivery, late bool) {
	if late {
		return // Pub/Sub stopped waiting: the ack comes too late to count
	}
	w.mu.Lock()
	if !d.ms.acked && !d.ms.dead {
		d.ms.acked = true
		close(d.ms.settled)
	}
	w.mu.Unlock()
}

// doneExpired reports whether a DONE record of d's key that an ack found
// has expired by now, and d began before it expired: d's Claim may have
// met it.
func (w *world) doneExpired(d *delivery) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ks := w.key(d.ms.key)
	return ks.sawDone && !time.Now().Before(ks.doneUntil) && d.start.Before(ks.doneUntil)
}

// finalChecks runs the end-of-run rules.
func (w *world) finalChecks() {
	ctx := context.Background()
	for _, ms := range w.msgs {
		switch {
		case !ms.acked && !ms.dead:
			w.violateKey(ms.key, ruleUnsettled, "message "+ms.m.ID+" was neither acked nor dead-lettered by the end")
		case ms.dead && w.onlyBusy(ms):
			w.violateKey(ms.key, ruleMutex, fmt.Sprintf("message %s was dead-lettered with no failure but its body's Mutex meeting a busy entity: contention must be paced, not dead-lettered", ms.m.ID))
		case ms.dead:
			for _, d := range ms.attempts {
				if !d.a.injectedFailure() && !d.refused && !d.held && !d.busy && !d.struck && !d.metFailure() {
					w.violateKey(ms.key, ruleDeadLetter, fmt.Sprintf("message %s was dead-lettered, but attempt %d was no real failure: nothing was injected, it met no other payload, no live holder, no crash or pause", ms.m.ID, d.a.N))
					break
				}
			}
		case ms.ackedFailed:
			// Acked with AckFailed: the message is dropped, its work
			// failed for good (failed-ack checked the ack).
		default:
			ks := w.keys[ms.key]
			rec, live, err := w.insp.Inspect(ctx, ms.key)
			switch {
			case err != nil:
				w.violateKey(ms.key, ruleHarness, "reading the record at the end: "+err.Error())
			case live && rec.State == store.Done, !live && ks.sawDone, ks.undoneAck, ks.forgotten:
			case ks.sawDone && !rec.ReadAt.Before(ks.doneUntil):
				// The DONE record the acks found lived its ttl; a later
				// delivery's Claim made a new record, which is no DONE.
			default:
				w.violateKey(ms.key, ruleLost, fmt.Sprintf("message %s was acked, but its record is %s at the end", ms.m.ID, w.describe(rec, live)))
			}
			if w.effects(ms.key) == 0 {
				w.violateKey(ms.key, ruleLost, fmt.Sprintf("message %s was acked, but its work was never done: no effect in the sink", ms.m.ID))
			}
		}
	}
	for key, ks := range w.keys {
		n := w.effects(key)
		switch {
		case n <= 1:
		case w.b.Tx != nil:
			if !ks.expired {
				w.violateKey(key, ruleRepeat, fmt.Sprintf("%d effects committed in the transactional sink; exactly one is the rule", n))
			}
		case !ks.excused:
			w.violateKey(key, ruleRepeat, fmt.Sprintf("%d effects in the ledger (fences %v), and nothing injected made a repeat unavoidable", n, w.led.fences[key]))
		}
	}
	if w.sc.HideKeys {
		w.checkHiddenKeys()
	}
}

// checkHiddenKeys: under HideKeys no log line names a business key (a
// messageId key is the message's ID, which every line carries anyway).
func (w *world) checkHiddenKeys() {
	var secret []string
	if w.sc.BusinessKey {
		for key := range w.keys {
			secret = append(secret, key)
		}
	}
	for _, m := range w.sc.Messages {
		secret = append(secret, "welcome:"+w.b.Prefix+m.Customer, "po:"+w.b.Prefix+m.Customer)
	}
	slices.Sort(secret)
	secret = slices.Compact(secret)
	leaks := 0
	look := func(what, text string) {
		for _, k := range secret {
			if strings.Contains(text, k) {
				if leaks < 3 {
					w.violateKey(k, ruleHideKeys, what+" names the key under HideKeys: "+text)
				}
				leaks++
			}
		}
	}
	for _, l := range w.logs.all() {
		look("a log line", l.text)
	}
	w.mu.Lock()
	texts := slices.Clone(w.texts)
	w.mu.Unlock()
	for _, t := range texts {
		look("an error or answer the library returned", t)
	}
	if w.spans != nil {
		spans := w.spans.Ended()
		for _, s := range w.spans.Started() {
			spans = append(spans, s)
		}
		for _, s := range spans {
			look("a span", renderSpan(s))
		}
	}
}

// renderSpan renders what a span exports: its name, attributes, events
// (a recorded error's message among them) and status.
func renderSpan(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	b.WriteString(s.Name())
	for _, a := range s.Attributes() {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
	}
	for _, e := range s.Events() {
		fmt.Fprintf(&b, " event %s", e.Name)
		for _, a := range e.Attributes {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
		}
	}
	fmt.Fprintf(&b, " status %s %s", s.Status().Code, s.Status().Description)
	return b.String()
}

// checkClaimInstant holds a Claim of key, answered c at the instant at (no
// time passed during the call), to the store contract at that instant: a
// holder's lease is over at its end (now ≥ leaseUntil: the key is
// reclaimable), and a DONE record is gone at its expiry (now ≥ expiresAt).
// done is the DONE record the Claim waited for, if any (see
// faulty.edgeClaim).
func (w *world) checkClaimInstant(d *delivery, key string, at time.Time, c store.Claim, done store.Record) {
	switch {
	case c.Status == store.HeldByOther && !c.LeaseUntil.After(at):
		w.violateKey(key, ruleInstant, fmt.Sprintf("%s: a Claim at %s answered HeldByOther (fence %d) with a lease that ends at %s: at its end a lease is over",
			whoOf(d), fmtDur(at.Sub(w.start)), c.Fence, fmtDur(c.LeaseUntil.Sub(w.start))))
	case c.Status == store.AlreadyDone && done.State == store.Done && c.Fence == done.Fence && !at.Before(done.ExpiresAt):
		w.violateKey(key, ruleInstant, fmt.Sprintf("%s: a Claim at %s answered AlreadyDone (fence %d) from a DONE record that expired at %s: at its expiry a record is gone",
			whoOf(d), fmtDur(at.Sub(w.start)), c.Fence, fmtDur(done.ExpiresAt.Sub(w.start))))
	}
}

// checkCompleteInstant holds a Complete of c, answered ok at the instant at
// (no time passed), to the contract at that instant: it records a claim
// that still owns its record whatever its lease (Complete has no lease
// check), and it answers false for a DONE record at or past its expiry.
// done is the DONE record the Complete waited for, if any (see
// faulty.edgeComplete).
func (w *world) checkCompleteInstant(d *delivery, c store.Claim, at time.Time, ok bool, done store.Record) {
	if ok {
		if done.State == store.Done && !at.Before(done.ExpiresAt) {
			w.violateKey(c.Key, ruleInstant, fmt.Sprintf("%s: Complete of fence %d at %s answered true on a DONE record that expired at %s: at its expiry a record is gone",
				whoOf(d), c.Fence, fmtDur(at.Sub(w.start)), fmtDur(done.ExpiresAt.Sub(w.start))))
		}
		return
	}
	rec, live, err := w.insp.Inspect(context.Background(), c.Key)
	if err == nil && live && rec.State == store.Claimed && rec.Fence == c.Fence && rec.Token == c.Token && rec.Token != "" {
		w.violateKey(c.Key, ruleInstant, fmt.Sprintf("%s: Complete of fence %d at %s answered false while its claim still owns the record (%s)",
			whoOf(d), c.Fence, fmtDur(at.Sub(w.start)), w.describe(rec, live)))
	}
}

// Result is what a run found.
type Result struct {
	Scenario   *Scenario
	Backend    string
	Violations []Violation
	Elapsed    time.Duration // on the run's clock (fake under synctest)
	events     []traceLine
	test       string
	// desc, if set, describes the scenario instead of Scenario (the
	// pipeline family's, whose Scenario holds only the seed).
	desc string
}

// Failed reports whether a rule was broken.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// Broke reports whether a rule named rule was broken.
func (r *Result) Broke(rule string) bool {
	for _, v := range r.Violations {
		if v.Rule == rule {
			return true
		}
	}
	return false
}

// Rules returns the names of the rules broken, sorted.
func (r *Result) Rules() []string {
	var rules []string
	for _, v := range r.Violations {
		rules = append(rules, v.Rule)
	}
	slices.Sort(rules)
	return slices.Compact(rules)
}

// Report is the failure message: the seed, the scenario, the violations
// and the trace of each key they concern.
func (r *Result) Report() string {
	var b strings.Builder
	desc := r.desc
	if desc == "" {
		desc = r.Scenario.String()
	}
	fmt.Fprintf(&b, "sim on %s: %s\nreplay with: go test ./internal/sim/ -run '%s' -sim.seed=%d\n", r.Backend, desc, r.test, r.Scenario.Seed)
	keys := map[string]bool{}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "%s\n", v)
		keys[v.Key] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		fmt.Fprintf(&b, "trace of key %q:\n", k)
		var lines []traceLine
		for _, e := range r.events {
			if e.key == k {
				lines = append(lines, e)
			}
		}
		if skip := len(lines) - 80; skip > 0 {
			fmt.Fprintf(&b, "  (%d earlier lines left out)\n", skip)
			lines = lines[skip:]
		}
		for _, e := range lines {
			fmt.Fprintf(&b, "  %s %s\n", fmtDur(e.at), e.text)
		}
	}
	return b.String()
}

func itoa(i int) string { return fmt.Sprint(i) }

// Trace returns the whole trace, one event a line.
func (r *Result) Trace() string {
	var b strings.Builder
	for _, e := range r.events {
		fmt.Fprintf(&b, "%s %q %s\n", fmtDur(e.at), e.key, e.text)
	}
	return b.String()
}

// who names a delivery in the trace: m<message ID> a<attempt>, c for a copy.
func (d *delivery) who() string {
	s := "m" + d.ms.m.ID + " a" + itoa(d.a.N)
	if d.a.Copy {
		s += "c"
	}
	return s
}

// noteOutcome records what the guard's line says of d: a live holder met
// (in progress), or another payload's record (a conflict).
func (w *world) noteOutcome(d *delivery, outcome string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d.outcome = outcome
	switch outcome {
	case "in_progress":
		d.held = true
	case "conflict":
		d.refused = true
	}
}

// onlyBusy reports whether every attempt of ms failed only because its
// body's Mutex met a busy entity.
func (w *world) onlyBusy(ms *msgState) bool {
	for _, d := range ms.attempts {
		if !d.busy || d.a.injectedFailure() || d.refused || d.struck {
			return false
		}
	}
	return len(ms.attempts) > 0
}
