package sqlstore

import "strings"

// ClaimsWithoutWriting reports whether s has switched PostgreSQL's Claim to
// the form that writes only when it wins (pgClaimNoWrite).
func ClaimsWithoutWriting(s *Store) bool { return s.noWrite.Load() }

// ClaimWithoutWriting switches s to that form now, so that tests can run it
// under READ COMMITTED too.
func ClaimWithoutWriting(s *Store) { s.noWrite.Store(true) }

// UseClock makes every statement of s read the SQL expression clock, a
// number of epoch milliseconds, wherever it read the database's clock. A
// test gives it a clock that moves on each reading, to see how many
// readings a statement takes and which of them its writes follow.
func UseClock(s *Store, clock string) {
	for _, q := range []*query{&s.q.claim, &s.q.claimNoWrite, &s.q.claimRead, &s.q.complete, &s.q.release, &s.q.extend, &s.q.purge} {
		for _, now := range []string{pgNow, mysqlNow, sqliteNow} {
			q.text = strings.ReplaceAll(q.text, now, clock)
		}
	}
}
