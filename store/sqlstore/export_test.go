package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
)

// ClaimsWithoutWriting reports whether s has switched PostgreSQL's Claim to
// the form that writes only when it wins (pgClaimNoWrite).
func ClaimsWithoutWriting(s *Store) bool { return s.noWrite.Load() }

// ClaimWithoutWriting switches s to that form now, so that tests can run it
// under READ COMMITTED too.
func ClaimWithoutWriting(s *Store) { s.noWrite.Store(true) }

// FailAt is failAt: the count at which f makes a record FAILED, 0 for
// never.
func FailAt(f store.Failure) int64 { return failAt(f) }

// UseClock makes every statement of s read the SQL expression clock, a
// number of epoch milliseconds, wherever it read the database's clock. A
// test gives it a clock that moves on each reading, to see how many
// readings a statement takes and which of them its writes follow.
func UseClock(s *Store, clock string) {
	for _, q := range []*query{&s.q.claim, &s.q.claimNoWrite, &s.q.claimFinal, &s.q.claimRead, &s.q.complete, &s.q.release, &s.q.extend, &s.q.fail, &s.q.purge} {
		for _, now := range []string{pgNow, mysqlNow, sqliteNow} {
			q.text = strings.ReplaceAll(q.text, now, clock)
		}
	}
}

// ClaimWAL runs the Claim statement s would send for key (its token and
// lease as given, no fingerprint) under PostgreSQL's EXPLAIN (ANALYZE,
// WAL), and returns the most WAL records any node of the plan reports: 0
// when the statement wrote no WAL at all.
func ClaimWAL(ctx context.Context, s *Store, key, token string, lease time.Duration) (int64, error) {
	q := s.q.claim
	if s.noWrite.Load() {
		q = s.q.claimNoWrite
	}
	var plan []byte
	err := s.db.QueryRowContext(ctx, "EXPLAIN (ANALYZE, WAL, FORMAT JSON) "+q.text, keyHash(key), key, token, ceilMillis(lease), nil, nil).Scan(&plan)
	if err != nil {
		return 0, err
	}
	var nodes []struct{ Plan json.RawMessage }
	if err := json.Unmarshal(plan, &nodes); err != nil || len(nodes) != 1 {
		return 0, fmt.Errorf("EXPLAIN answered %s: %v", plan, err)
	}
	return maxWAL(nodes[0].Plan)
}

// maxWAL returns the largest "WAL Records" of node and the nodes under it.
func maxWAL(node json.RawMessage) (int64, error) {
	var n struct {
		WAL   int64             `json:"WAL Records"`
		Plans []json.RawMessage `json:"Plans"`
	}
	if err := json.Unmarshal(node, &n); err != nil {
		return 0, err
	}
	most := n.WAL
	for _, p := range n.Plans {
		m, err := maxWAL(p)
		if err != nil {
			return 0, err
		}
		most = max(most, m)
	}
	return most, nil
}
