package sqlstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// errSnapshotRace is returned by a PostgreSQL claim statement that found
// no row to report: the record was inserted by a concurrent Claim after the
// statement's snapshot was taken (see pgClaimNoWrite). Running the
// statement again settles it.
var errSnapshotRace = errors.New("the record appeared after the claim's snapshot")

// maxAttempts bounds how often one operation runs its statement when the
// database answers with a transient error.
const maxAttempts = 10

// maxBackoff caps the wait between two attempts.
const maxBackoff = 256 * time.Millisecond

// retry runs op until it succeeds, fails for good, or has run maxAttempts
// times, pausing a random time whose bound doubles each attempt (2ms up to
// maxBackoff). A transient error (spec.transient) means the database rolled
// the statement back, so running it again is safe: Claim reuses its token,
// and the others are guarded by the fence.
func (s *Store) retry(ctx context.Context, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if errors.Is(err, errSnapshotRace) && attempt < maxAttempts {
			continue // nothing to wait for: the next statement sees the row
		}
		if err == nil || attempt == maxAttempts || !s.spec.transient(err) {
			return err
		}
		t := time.NewTimer(rand.N(min(time.Millisecond<<attempt, maxBackoff)))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
	}
}
