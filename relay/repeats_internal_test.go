package relay

import (
	"testing"
	"time"
)

// A failure that repeats is logged at once, then once per step (doubled
// after each line, capped), each line counting the failures it stands
// for, those left out since the one before included; kinds are independent; a kind quiet for twice the
// cap starts over, its left-out failures counted on its next line.
func TestRepeatsThinOutOneKind(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	r := newRepeats(time.Second, 4*time.Second)
	topic := failureKind{op: opPublish, topic: "projects/p/topics/missing", code: "NotFound"}
	take := failureKind{op: opTake}
	for i, step := range []struct {
		kind     failureKind
		at       time.Duration
		log      bool
		count    int // the failures the line stands for
		describe string
	}{
		{topic, 0, true, 1, "the first failure is logged"},
		{topic, 200 * time.Millisecond, false, 0, "within the first step"},
		{topic, 500 * time.Millisecond, false, 0, "within the first step"},
		{take, 600 * time.Millisecond, true, 1, "another kind is logged on its own"},
		{topic, 900 * time.Millisecond, false, 0, "within the first step"},
		{topic, time.Second, true, 4, "the first step over: logged, for itself and three left out"},
		{topic, 2900 * time.Millisecond, false, 0, "within the second step (2s)"},
		{topic, 3 * time.Second, true, 2, "the second step over"},
		{topic, 6 * time.Second, false, 0, "within the third step (4s, the cap)"},
		{topic, 7 * time.Second, true, 2, "the third step over"},
		{topic, 11 * time.Second, true, 1, "the step stays at the cap"},
		{topic, 12 * time.Second, false, 0, "within the step"},
		{topic, 20*time.Second + time.Millisecond, true, 2, "quiet for over twice the cap: starts over, counting the one left out"},
		{topic, 20*time.Second + 2*time.Millisecond, false, 0, "started over: the first step again"},
		{topic, 21*time.Second + time.Millisecond, true, 2, "the first step (1s) over"},
	} {
		count, log := r.failed(step.kind, 1, at(step.at))
		if log != step.log || count != step.count {
			t.Errorf("step %d at %v (%s): failed = %d, %v; want %d, %v", i, step.at, step.describe, count, log, step.count, step.log)
		}
	}
	total, began, ok := r.ended(func(k failureKind) bool { return k.topic == topic.topic })
	if !ok || total != 3 || !began.Equal(at(20*time.Second+time.Millisecond)) {
		t.Errorf("ended = %d, %v, %v; want the 3 failures of the episode that began at 20.001s", total, began, ok)
	}
	if _, _, ok := r.ended(func(k failureKind) bool { return k.topic == topic.topic }); ok {
		t.Error("ended twice reports the failures again")
	}
	if n, log := r.failed(topic, 1, at(21*time.Second+2*time.Millisecond)); !log || n != 1 {
		t.Errorf("the first failure after ended = %d, %v; want logged at once, for itself", n, log)
	}
	if _, _, ok := r.ended(func(k failureKind) bool { return k.op == opTake }); !ok {
		t.Error("the take failure was not going on")
	}
}

// A storm of one failure logs O(log) lines, plus one per capped step, and
// no failure goes uncounted.
func TestRepeatsBoundAStorm(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRepeats(time.Second, 4*time.Second)
	k := failureKind{op: opPublish, topic: "projects/p/topics/missing", code: "NotFound"}
	const n, over = 6000, time.Minute
	lines, counted, last := 0, 0, 0
	for i := range n {
		count, log := r.failed(k, 1, t0.Add(over*time.Duration(i)/n))
		if log {
			lines++
			counted += count
			last = i
		}
	}
	// Lines at 0, 1s, 3s, 7s, then every 4s to 60s.
	if lines > 18 {
		t.Errorf("%d lines for %d failures in %v; want at most 18: one per step", lines, n, over)
	}
	if counted != last+1 {
		t.Errorf("the lines count %d failures, want %d: every failure up to the last line", counted, last+1)
	}
}
