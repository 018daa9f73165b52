package storetest

import (
	"fmt"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/idemgate/idemgate/store"
)

// This file is the sequential specification the Linearizable case checks
// histories against: the transition table of the store package, one record
// per key, with no clock. The case gives every claim an hour-long lease and
// every store an hour-long ttl, so while it runs no lease lapses and no
// record expires; the rows guarded by the clock then reduce to whether a
// CLAIMED record was released (Release sets leaseUntil = now, which makes it
// reclaimable at once) or is still held.
//
// A store that implements store.Failer adds Fail and Retry and the FAILED
// phase, which only Retry leaves while the case runs (its record expires
// an hour after it failed).

// opKind names a store method.
type opKind uint8

const (
	opClaim opKind = iota + 1
	opComplete
	opRelease
	opExtend
	opFail
	opRetry
)

// linCall is the input of one recorded operation.
type linCall struct {
	op  opKind
	key string
	// token is the Claim's token when the caller fixed it with
	// store.ClaimOptions.Token, and "" when the store chose a fresh one (which
	// matches no record).
	token string
	// fence is the fence of the claim passed to Complete, Release, Extend
	// or Fail.
	fence int64
	// final and max are Fail's store.Failure (its reason is not modelled).
	final bool
	max   int
}

// linResult is the output of one recorded operation: only what the table
// decides. Instants (LeaseUntil) are not compared.
type linResult struct {
	status   store.Status // Claim
	fence    int64        // Claim; Extend unless fenced
	ok       bool         // Complete, Retry; Fail's failed
	fenced   bool         // Extend returned store.ErrFenced
	attempts int          // Fail; Claim when AlreadyFailed
}

// phase is where a record stands in the table.
type phase uint8

const (
	absent   phase = iota
	held           // CLAIMED with a live lease
	released       // CLAIMED with leaseUntil = the instant of its Release
	done           // DONE
	failed         // FAILED
)

// linState is the specification's record for one key. It is comparable, so
// porcupine's default equality applies.
type linState struct {
	phase    phase
	fence    int64
	token    string // the winning Claim's token when fixed by the caller
	attempts int    // failed attempts since the record was made or retried
}

// linStep applies in to s as the transition table says, returning the new
// record and the result the store must have given.
//
// A released record is free for any token, the released claim's included
// (the ReleasedTokenNotReaffirmed case checks that corner; the Linearizable
// case never reuses a token once its claim is settled). Complete and Extend
// follow the table literally on a released record, but its fence was bumped
// past every fence ever handed out, so no caller matches it.
//
// A FAILED record answers Complete, Release and Extend as a record its
// caller does not own, although it keeps the fence of the claim that
// failed: only Fail, retried under that fence, is told it failed.
func linStep(s linState, in linCall) (linState, linResult) {
	matches := in.fence == s.fence && s.phase != absent
	owned := matches && s.phase != failed // matches a record that may still be written
	switch in.op {
	case opClaim:
		switch {
		case s.phase == done:
			return s, linResult{status: store.AlreadyDone, fence: s.fence}
		case s.phase == failed:
			return s, linResult{status: store.AlreadyFailed, fence: s.fence, attempts: s.attempts}
		case s.phase == held && in.token != "" && in.token == s.token:
			return s, linResult{status: store.Won, fence: s.fence} // a retry re-affirms
		case s.phase == held:
			return s, linResult{status: store.HeldByOther, fence: s.fence}
		}
		// Absent or released: the fence rises. The store chooses by how
		// much (see store.FenceAt), so s.fence + 1 is the least it may
		// hand out; linModel takes the fence the store answered. A
		// released record's failures carry over to the winner.
		s = linState{phase: held, fence: s.fence + 1, token: in.token, attempts: s.attempts}
		return s, linResult{status: store.Won, fence: s.fence}
	case opComplete:
		if !owned {
			return s, linResult{}
		}
		return linState{phase: done, fence: s.fence, attempts: s.attempts}, linResult{ok: true}
	case opRelease:
		if owned && s.phase != done {
			// The fence rises by at least one; nobody learns by how much,
			// so no later call can match the released record's fence.
			s = linState{phase: released, fence: s.fence + 1, attempts: s.attempts}
		}
		return s, linResult{}
	case opExtend:
		if !owned || s.phase == done {
			return s, linResult{fenced: true}
		}
		s.phase = held
		return s, linResult{fence: s.fence}
	case opFail:
		switch {
		case matches && s.phase == failed:
			return s, linResult{ok: true, attempts: s.attempts} // a retried Fail
		case !owned || s.phase == done:
			return s, linResult{}
		}
		n, final := store.Failure{Final: in.final, MaxAttempts: in.max}.FailedAttempts(s.attempts)
		if final {
			return linState{phase: failed, fence: s.fence, attempts: n}, linResult{ok: true, attempts: n}
		}
		return linState{phase: released, fence: s.fence + 1, attempts: n}, linResult{attempts: n} // a Release that counts
	case opRetry:
		if s.phase != failed {
			return s, linResult{}
		}
		return linState{phase: released, fence: s.fence + 1}, linResult{ok: true}
	}
	panic(fmt.Sprintf("storetest: unknown operation %d", in.op))
}

// linModel is the porcupine model of linStep, partitioned by key: records
// of different keys never interact, and small partitions keep the search
// cheap.
func linModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() any { return linState{} },
		Step: func(state, input, output any) (bool, any) {
			s, got := state.(linState), output.(linResult)
			next, want := linStep(s, input.(linCall))
			if want.status == store.Won && next.fence != s.fence && got.status == store.Won && got.fence >= want.fence {
				// A win that raised the fence: any fence above the last
				// will do (linStep's is the least), and the record keeps
				// the one the store handed out.
				next.fence, want.fence = got.fence, got.fence
			}
			return got == want, next
		},
		DescribeOperation: func(input, output any) string {
			return describeOp(input.(linCall), output.(linResult))
		},
		DescribeState: func(state any) string { return state.(linState).String() },
	}
}

// partitionByKey splits a history into one history per key, in key order
// so that reports are stable.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(linCall).key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

func (s linState) String() string {
	switch s.phase {
	case absent:
		return "absent"
	case held:
		if s.token != "" {
			return fmt.Sprintf("CLAIMED fence %d token %s", s.fence, s.token)
		}
		return fmt.Sprintf("CLAIMED fence %d", s.fence)
	case released:
		return fmt.Sprintf("released, fence %d%s", s.fence, s.failures())
	case failed:
		return fmt.Sprintf("FAILED fence %d%s", s.fence, s.failures())
	default:
		return fmt.Sprintf("DONE fence %d", s.fence)
	}
}

// failures renders the attempt count of a record that has one.
func (s linState) failures() string {
	if s.attempts == 0 {
		return ""
	}
	return fmt.Sprintf(", %d failed", s.attempts)
}

// describeCall renders a call as "Claim(token t)" or "Complete(fence 2)".
func describeCall(in linCall) string {
	switch in.op {
	case opClaim:
		if in.token != "" {
			return fmt.Sprintf("Claim(token %s)", in.token)
		}
		return "Claim"
	case opComplete:
		return fmt.Sprintf("Complete(fence %d)", in.fence)
	case opRelease:
		return fmt.Sprintf("Release(fence %d)", in.fence)
	case opFail:
		switch {
		case in.final:
			return fmt.Sprintf("Fail(fence %d, final)", in.fence)
		case in.max > 0:
			return fmt.Sprintf("Fail(fence %d, max %d)", in.fence, in.max)
		}
		return fmt.Sprintf("Fail(fence %d)", in.fence)
	case opRetry:
		return "Retry"
	default:
		return fmt.Sprintf("Extend(fence %d)", in.fence)
	}
}

// describeOp renders a call and its result, as "Claim → won fence 2".
func describeOp(in linCall, out linResult) string {
	switch in.op {
	case opClaim:
		if out.status == store.AlreadyFailed {
			return fmt.Sprintf("%s → %v fence %d, %d failed", describeCall(in), out.status, out.fence, out.attempts)
		}
		return fmt.Sprintf("%s → %v fence %d", describeCall(in), out.status, out.fence)
	case opFail:
		return fmt.Sprintf("%s → %d, %v", describeCall(in), out.attempts, out.ok)
	case opRetry:
		return fmt.Sprintf("%s → %v", describeCall(in), out.ok)
	case opComplete:
		return fmt.Sprintf("%s → %v", describeCall(in), out.ok)
	case opExtend:
		if out.fenced {
			return describeCall(in) + " → ErrFenced"
		}
		return fmt.Sprintf("%s → fence %d", describeCall(in), out.fence)
	default:
		return describeCall(in)
	}
}
