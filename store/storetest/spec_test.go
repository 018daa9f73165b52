package storetest

import (
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/idemgate/idemgate/store"
)

// TestLinStepFollowsTheTable walks linStep through each row of the
// transition table (without the clock) and the corners around it.
func TestLinStepFollowsTheTable(t *testing.T) {
	var (
		absentRec   = linState{}
		heldRec     = linState{phase: held, fence: 3, token: "t"}
		heldAnon    = linState{phase: held, fence: 3}
		releasedRec = linState{phase: released, fence: 4}
		doneRec     = linState{phase: done, fence: 3}
		heldFailed  = linState{phase: held, fence: 3, token: "t", attempts: 1}
		relFailed   = linState{phase: released, fence: 4, attempts: 1}
		failedRec   = linState{phase: failed, fence: 3, attempts: 2}
	)
	claim := func(token string) linCall { return linCall{op: opClaim, key: "k", token: token} }
	with := func(op opKind, fence int64) linCall { return linCall{op: op, key: "k", fence: fence} }
	fail := func(fence int64, final bool, max int) linCall {
		return linCall{op: opFail, key: "k", fence: fence, final: final, max: max}
	}
	retry := linCall{op: opRetry, key: "k"}
	tests := []struct {
		name string
		s    linState
		in   linCall
		next linState
		out  linResult
	}{
		{"Claim of an absent key wins fence 1", absentRec, claim("a"), linState{phase: held, fence: 1, token: "a"}, linResult{status: store.Won, fence: 1}},
		{"Claim with the holder's token re-affirms", heldRec, claim("t"), heldRec, linResult{status: store.Won, fence: 3}},
		{"Claim with another token is HeldByOther", heldRec, claim("u"), heldRec, linResult{status: store.HeldByOther, fence: 3}},
		{"a store-chosen token matches no holder", heldAnon, claim(""), heldAnon, linResult{status: store.HeldByOther, fence: 3}},
		{"Claim of a released key wins the next fence", releasedRec, claim("a"), linState{phase: held, fence: 5, token: "a"}, linResult{status: store.Won, fence: 5}},
		{"Claim of a DONE key is AlreadyDone", doneRec, claim("a"), doneRec, linResult{status: store.AlreadyDone, fence: 3}},
		{"Complete by the holder marks DONE", heldRec, with(opComplete, 3), doneRec, linResult{ok: true}},
		{"a retried Complete on DONE is true", doneRec, with(opComplete, 3), doneRec, linResult{ok: true}},
		{"Complete with another fence on DONE is false", doneRec, with(opComplete, 2), doneRec, linResult{}},
		{"Complete with a stale fence is false", heldRec, with(opComplete, 2), heldRec, linResult{}},
		{"Complete of a released claim is false", releasedRec, with(opComplete, 3), releasedRec, linResult{}},
		{"Complete of an absent key is false", absentRec, with(opComplete, 0), absentRec, linResult{}},
		{"Release by the holder bumps the fence", heldRec, with(opRelease, 3), releasedRec, linResult{}},
		{"Release with a stale fence is a no-op", heldRec, with(opRelease, 2), heldRec, linResult{}},
		{"Release of DONE is a no-op", doneRec, with(opRelease, 3), doneRec, linResult{}},
		{"Release of an absent key is a no-op", absentRec, with(opRelease, 0), absentRec, linResult{}},
		{"Extend by the holder keeps the fence", heldRec, with(opExtend, 3), heldRec, linResult{fence: 3}},
		{"Extend with a stale fence is fenced", heldRec, with(opExtend, 2), heldRec, linResult{fenced: true}},
		{"Extend of a released claim is fenced", releasedRec, with(opExtend, 3), releasedRec, linResult{fenced: true}},
		{"Extend of DONE is fenced", doneRec, with(opExtend, 3), doneRec, linResult{fenced: true}},
		{"Extend of an absent key is fenced", absentRec, with(opExtend, 0), absentRec, linResult{fenced: true}},
		{"a counted Fail releases with a raised fence", heldRec, fail(3, false, 0), linState{phase: released, fence: 4, attempts: 1}, linResult{attempts: 1}},
		{"a counted Fail adds to the count", heldFailed, fail(3, false, 3), linState{phase: released, fence: 4, attempts: 2}, linResult{attempts: 2}},
		{"a Fail that reaches the budget goes FAILED keeping the fence", heldFailed, fail(3, false, 2), failedRec, linResult{ok: true, attempts: 2}},
		{"a final Fail goes FAILED keeping the fence", heldFailed, fail(3, true, 0), failedRec, linResult{ok: true, attempts: 2}},
		{"a Fail with a stale fence is a no-op", heldRec, fail(2, true, 0), heldRec, linResult{}},
		{"a Fail of a released claim is a no-op", releasedRec, fail(3, true, 0), releasedRec, linResult{}},
		{"a Fail of DONE is a no-op", doneRec, fail(3, true, 0), doneRec, linResult{}},
		{"a Fail of an absent key is a no-op", absentRec, fail(0, true, 0), absentRec, linResult{}},
		{"a retried Fail on FAILED answers its count", failedRec, fail(3, false, 0), failedRec, linResult{ok: true, attempts: 2}},
		{"a Fail with another fence on FAILED is a no-op", failedRec, fail(2, true, 0), failedRec, linResult{}},
		{"a Claim of a released record keeps its count", relFailed, claim("a"), linState{phase: held, fence: 5, token: "a", attempts: 1}, linResult{status: store.Won, fence: 5}},
		{"Claim of a FAILED key is AlreadyFailed", failedRec, claim("a"), failedRec, linResult{status: store.AlreadyFailed, fence: 3, attempts: 2}},
		{"Complete of FAILED is false", failedRec, with(opComplete, 3), failedRec, linResult{}},
		{"Release of FAILED is a no-op", failedRec, with(opRelease, 3), failedRec, linResult{}},
		{"Extend of FAILED is fenced", failedRec, with(opExtend, 3), failedRec, linResult{fenced: true}},
		{"Retry of FAILED releases with no count", failedRec, retry, linState{phase: released, fence: 4}, linResult{ok: true}},
		{"Retry of a released record is a no-op", relFailed, retry, relFailed, linResult{}},
		{"Retry of a held record is a no-op", heldRec, retry, heldRec, linResult{}},
		{"Retry of DONE is a no-op", doneRec, retry, doneRec, linResult{}},
		{"Retry of an absent key is a no-op", absentRec, retry, absentRec, linResult{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, out := linStep(tt.s, tt.in)
			if out != tt.out {
				t.Errorf("%s from %s: result %+v, want %+v", describeCall(tt.in), tt.s, out, tt.out)
			}
			if next != tt.next {
				t.Errorf("%s from %s: record %s, want %s", describeCall(tt.in), tt.s, next, tt.next)
			}
		})
	}
}

// op builds a recorded operation on key "k" for the porcupine tests.
func op(client int, call, ret int64, in linCall, out linResult) porcupine.Operation {
	in.key = "k"
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func TestLinModelJudgesHistories(t *testing.T) {
	won := func(f int64) linResult { return linResult{status: store.Won, fence: f} }
	held := func(f int64) linResult { return linResult{status: store.HeldByOther, fence: f} }
	claim := linCall{op: opClaim}
	release := func(f int64) linCall { return linCall{op: opRelease, fence: f} }
	complete := func(f int64) linCall { return linCall{op: opComplete, fence: f} }
	fail := func(f int64, final bool) linCall { return linCall{op: opFail, fence: f, final: final} }
	retry := linCall{op: opRetry}
	tests := []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"overlapping claims, one winner", []porcupine.Operation{
			op(0, 0, 10, claim, won(1)),
			op(1, 1, 9, claim, held(1)),
		}, true},
		{"overlapping claims, two winners", []porcupine.Operation{
			op(0, 0, 10, claim, won(1)),
			op(1, 1, 9, claim, won(1)),
		}, false},
		{"a claim overlapping a release may see either side", []porcupine.Operation{
			op(0, 0, 1, claim, won(1)),
			op(0, 2, 10, release(1), linResult{}),
			op(1, 3, 9, claim, won(3)),
			op(2, 4, 8, claim, held(1)),
		}, true},
		{"a claim after a release must not see the released record as held", []porcupine.Operation{
			op(0, 0, 1, claim, won(1)),
			op(0, 2, 10, release(1), linResult{}),
			op(1, 3, 9, claim, held(2)),
		}, false},
		{"a DONE key cannot be won again", []porcupine.Operation{
			op(0, 0, 1, claim, won(1)),
			op(0, 2, 3, complete(1), linResult{ok: true}),
			op(1, 4, 5, claim, won(2)),
		}, false},
		{"a FAILED key cannot be won again", []porcupine.Operation{
			op(0, 0, 1, claim, won(1)),
			op(0, 2, 3, fail(1, true), linResult{ok: true, attempts: 1}),
			op(1, 4, 5, claim, won(2)),
		}, false},
		{"a claim overlapping a Retry may see either side", []porcupine.Operation{
			op(0, 0, 1, claim, won(1)),
			op(0, 2, 3, fail(1, true), linResult{ok: true, attempts: 1}),
			op(1, 4, 10, retry, linResult{ok: true}),
			op(2, 5, 9, claim, won(3)),
			op(3, 5, 9, claim, linResult{status: store.AlreadyFailed, fence: 1, attempts: 1}),
		}, true},
		{"failures of successive holders add up", []porcupine.Operation{
			op(0, 0, 1, claim, won(1)),
			op(0, 2, 3, fail(1, false), linResult{attempts: 1}),
			op(1, 4, 5, claim, won(3)),
			op(1, 6, 7, fail(3, false), linResult{attempts: 1}),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(linModel(), tt.ops); got != tt.legal {
				t.Errorf("linearizable = %v, want %v", got, tt.legal)
			}
		})
	}
}

func TestPartitionByKeyIsSorted(t *testing.T) {
	var h []porcupine.Operation
	for _, k := range []string{"b", "a", "c", "a"} {
		h = append(h, porcupine.Operation{Input: linCall{op: opClaim, key: k}, Output: linResult{}})
	}
	parts := partitionByKey(h)
	var got []string
	for _, p := range parts {
		got = append(got, p[0].Input.(linCall).key)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("partitions by key = %v, want %v", got, want)
	}
	if len(parts[0]) != 2 {
		t.Fatalf("key a has %d calls, want 2", len(parts[0]))
	}
}
