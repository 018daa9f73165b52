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
	)
	claim := func(token string) linCall { return linCall{op: opClaim, key: "k", token: token} }
	with := func(op opKind, fence int64) linCall { return linCall{op: op, key: "k", fence: fence} }
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
