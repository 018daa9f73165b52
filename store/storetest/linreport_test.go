package storetest

import (
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/idemgate/idemgate/store"
)

// TestViolationNamesTheKeyAndItsCalls checks that a report shows where the
// history broke: the key, how far a legal order got, and the calls.
func TestViolationNamesTheKeyAndItsCalls(t *testing.T) {
	won := linResult{status: store.Won, fence: 1}
	h := []porcupine.Operation{
		op(0, 0, 10, linCall{op: opClaim}, won),
		op(1, 1, 9, linCall{op: opClaim, token: "tok"}, won),
		{ClientId: 2, Input: linCall{op: opClaim, key: "zz-legal"}, Call: 0, Output: won, Return: 1},
	}
	res, info := porcupine.CheckOperationsVerbose(linModel(), h, linCheckTimeout)
	if res != porcupine.Illegal {
		t.Fatalf("check = %v, want Illegal", res)
	}
	err := (&env{}).violation(h, info)
	if err == nil {
		t.Fatal("violation returned nil")
	}
	msg := err.Error()
	for _, want := range []string{
		"for key k (2 calls)",
		"At most 1 of them",
		"leaving the record CLAIMED fence 1",
		"client 0  Claim → won fence 1",
		"client 1  Claim(token tok) → won fence 1",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("report lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "zz-legal") || strings.Contains(msg, "visualization") {
		t.Errorf("report names a legal key or a file it must not write:\n%s", msg)
	}
}
