package pull_test

import (
	"fmt"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
)

// waitOutcome waits until logs holds n records with outcome (for message
// id, if not empty).
func waitOutcome(t testing.TB, logs *logtest.Sink, outcome gateway.Outcome, id string, n int) {
	t.Helper()
	logs.Wait(t, waitFor, fmt.Sprintf("%d %q line(s) for message %q", n, outcome, id), func(recs logtest.Records) bool {
		return len(matching(recs, outcome, id)) >= n
	})
}

// matching returns the records with outcome (any, if empty) about message
// id (any, if empty).
func matching(recs logtest.Records, outcome gateway.Outcome, id string) logtest.Records {
	if outcome != "" {
		recs = recs.Outcome(outcome)
	}
	if id != "" {
		recs = recs.With("delivery.message_id", id)
	}
	return recs
}
