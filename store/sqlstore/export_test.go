package sqlstore

// ClaimsWithoutWriting reports whether s has switched PostgreSQL's Claim to
// the form that writes only when it wins (pgClaimNoWrite).
func ClaimsWithoutWriting(s *Store) bool { return s.noWrite.Load() }

// ClaimWithoutWriting switches s to that form now, so that tests can run it
// under READ COMMITTED too.
func ClaimWithoutWriting(s *Store) { s.noWrite.Store(true) }
