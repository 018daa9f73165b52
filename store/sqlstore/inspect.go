package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
)

var _ store.Inspector = (*Store)(nil)

// The operator's statements (Inspect, Forget, Now) are rendered when used
// rather than kept in statements: they run rarely, and rendering costs
// less than the round trip.

// inspectSelect reads the clock and the live record, if any, in one row:
// the LEFT JOIN yields NULLs when the key is absent or its record expired.
const inspectSelect = `SELECT clock.ms, r.state, r.fence, r.token, r.lease_until, r.expires_at, r.fingerprint, r.origin,
	r.attempts, r.reason, r.first_failure
FROM (SELECT {NOW} AS ms) AS clock LEFT JOIN {T} AS r ON r.key_hash = $1 AND r.expires_at > clock.ms`

// forgetUpdate turns a live record, CLAIMED, DONE or FAILED, into a released
// claim: Release's assignments without its guards. The origin stays, the
// failures go (a fresh budget), and the fence rises, so MySQL counts the row
// as affected whatever CLIENT_FOUND_ROWS says.
const forgetUpdate = `UPDATE {T} SET
	state       = 1,
	fence       = {MAX}(fence + 1, {NOW} * 1000),
	token       = '',
	fingerprint = NULL,
	lease_until = {NOW},
	expires_at  = {MAX}(expires_at, {NOW} + {TTL}),
	attempts    = NULL,
	reason      = NULL,
	first_failure = NULL
WHERE key_hash = $1 AND expires_at > {NOW}`

// render writes tmpl for the store's dialect, table and ttl, as its own
// statements are written.
func (s *Store) render(tmpl string) query { return s.q.render(tmpl) }

// Inspect implements [store.Inspector] in one statement, which reads the
// record and the database's clock together.
func (s *Store) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, false, fmt.Errorf("sqlstore: inspect: %w", err)
	}
	var (
		now                          int64
		state, fence, until, expires sql.NullInt64
		attempts, first              sql.NullInt64
		token, origin, reason        sql.NullString
		fp                           []byte
	)
	q := s.render(inspectSelect)
	err := s.retry(ctx, func() error {
		return s.queryRow(ctx, q, []any{&now, &state, &fence, &token, &until, &expires, &fp, &origin, &attempts, &reason, &first}, keyHash(key))
	})
	if err != nil {
		return store.Record{}, false, fmt.Errorf("sqlstore: inspect: %w", s.schemaHint(ctx, err))
	}
	if !state.Valid {
		return store.Record{}, false, nil
	}
	r := store.Record{
		Key:        key,
		State:      store.Claimed,
		Fence:      fence.Int64,
		Token:      token.String,
		LeaseUntil: time.UnixMilli(until.Int64),
		ExpiresAt:  time.UnixMilli(expires.Int64),
		Origin:     origin.String,
		ReadAt:     time.UnixMilli(now),
	}
	if len(fp) > 0 {
		r.Fingerprint = fp
	}
	if attempts.Int64 > 0 {
		r.Attempts, r.Reason = int(attempts.Int64), reason.String
		r.FirstFailure = time.UnixMilli(first.Int64)
	}
	switch state.Int64 {
	case 1:
	case 2:
		r.State, r.Token = store.Done, ""
		r.CompletedAt = r.LeaseUntil
	case 3:
		r.State, r.Token = store.Failed, ""
	default:
		return store.Record{}, false, fmt.Errorf("sqlstore: inspect: the row of %s has state %d, want 1, 2 or 3", store.QuoteKey(key), state.Int64)
	}
	return r, true, nil
}

// Forget implements [store.Inspector] in one UPDATE.
func (s *Store) Forget(ctx context.Context, key string) (bool, error) {
	return s.free(ctx, "forget", forgetUpdate, key)
}

// Now returns the database's clock, the one every statement decides with,
// to measure its skew against the caller's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := s.queryRow(ctx, s.render(`SELECT {NOW}`), []any{&ms}); err != nil {
		return time.Time{}, fmt.Errorf("sqlstore: clock: %w", err)
	}
	return time.UnixMilli(ms), nil
}

// TableExists reports whether the store's schema is complete (what
// [Store.CreateTable] makes). It changes nothing. A table whose key_hash is
// not unique as every Claim needs is an error naming what it lacks.
func (s *Store) TableExists(ctx context.Context) (bool, error) {
	st, err := s.lookSchema(ctx)
	if err != nil || !st.complete() {
		return false, err
	}
	return s.outboxComplete(ctx)
}
