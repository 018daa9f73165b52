package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/idemgate/idemgate/store"
)

var _ store.Failer = (*Store)(nil)

// addedColumns are the columns that versions after the first added to the
// records table: the payload's fingerprint, the origin, then a record's
// failures (store.Failer): the count of failed attempts, the last reason,
// the first failure's instant (ms). All NULL until used, so older tables
// need no rewrite.
var addedColumns = [...]string{"fingerprint", "origin", "attempts", "reason", "first_failure"}

// allAdded is the schema lookup's answer for a table that has all of
// addedColumns.
const allAdded = 1<<len(addedColumns) - 1

// failUpdate records a failed attempt of the live claim under fence $2 and
// token $3 (or answers a retried Fail on the FAILED record under $2 as the
// first did), in one statement shared by PostgreSQL and SQLite: reason $4,
// FAILED when the new count reaches $5 (0: never), else released. One
// sub-select reads the clock and takes the verdict once; RETURNING gives the
// count and the state (docs/stores/sql.md, "Fail, in one statement").
const failUpdate = `UPDATE {T} SET (state, fence, token, fingerprint, lease_until, expires_at, attempts, reason, first_failure) = (
	SELECT
		CASE WHEN f.failed THEN 3 ELSE 1 END,
		CASE WHEN f.failed THEN fence ELSE {MAX}(fence + 1, f.ms * 1000) END,
		'',
		CASE WHEN f.failed THEN fingerprint END,
		CASE WHEN state = 3 THEN lease_until ELSE f.ms END,
		CASE WHEN state = 3 THEN expires_at WHEN f.failed THEN f.ms + {TTL} ELSE {MAX}(expires_at, f.ms + {TTL}) END,
		f.n,
		CASE WHEN state = 3 THEN reason ELSE $4 END,
		COALESCE(first_failure, f.ms)
	FROM (
		SELECT ms, n, (state = 3 OR $5 > 0 AND n >= $5) AS failed
		FROM (SELECT {NOW} AS ms, CASE WHEN state = 3 THEN attempts ELSE COALESCE(attempts, 0) + 1 END AS n) AS c
	) AS f
)
WHERE key_hash = $1 AND fence = $2 AND (state = 3 OR state = 1 AND token = $3) AND expires_at > {NOW}
RETURNING attempts, state`

// retryUpdate is forgetUpdate (inspect.go) for a FAILED record only.
const retryUpdate = forgetUpdate + ` AND state = 3`

// failAt is the count at which f makes a record FAILED: 1 when final,
// f.MaxAttempts when positive and within the 32-bit count column, else 0
// (never).
func failAt(f store.Failure) int64 {
	switch {
	case f.Final:
		return 1
	case f.MaxAttempts > 0 && f.MaxAttempts <= math.MaxInt32:
		return int64(f.MaxAttempts)
	}
	return 0
}

// Fail implements [store.Failer] in one statement, decided on the
// database's clock.
func (s *Store) Fail(ctx context.Context, c store.Claim, f store.Failure) (int, bool, error) {
	if err := store.CheckWon(c); err != nil {
		return 0, false, fmt.Errorf("sqlstore: fail: %w", err)
	}
	if err := store.CheckReason(f.Reason); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("sqlstore: fail: %w", err)
	}
	hash, at := keyHash(c.Key), failAt(f)
	var attempts, state int64 // 0, 0: c owns no record
	err := s.retry(ctx, func() error {
		if s.spec.mysql {
			// See mysqlFail: 2 * attempts + failed, or 0.
			res, err := s.exec(ctx, s.q.fail, hash, c.Fence, c.Token, f.Reason, at)
			if err != nil {
				return err
			}
			id, err := res.LastInsertId()
			attempts, state = id/2, 1+2*(id%2)
			return err
		}
		err := s.queryRow(ctx, s.q.fail, []any{&attempts, &state}, hash, c.Fence, c.Token, f.Reason, at)
		if errors.Is(err, sql.ErrNoRows) {
			attempts, state, err = 0, 0, nil
		}
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("sqlstore: fail: %w", s.schemaHint(ctx, err))
	}
	return int(attempts), state == 3, nil
}

// Retry implements [store.Failer] in one UPDATE: a live FAILED record
// becomes a released claim, as Forget leaves it, without its failures.
func (s *Store) Retry(ctx context.Context, key string) (bool, error) {
	return s.free(ctx, "retry", retryUpdate, key)
}

// free runs tmpl, forgetUpdate or retryUpdate, on key's record for op
// (Forget, Retry), and reports whether it freed the record.
func (s *Store) free(ctx context.Context, op, tmpl, key string) (bool, error) {
	if err := store.CheckKey(key); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("sqlstore: %s: %w", op, err)
	}
	q := s.render(tmpl)
	var n int64
	err := s.retry(ctx, func() error {
		res, err := s.exec(ctx, q, keyHash(key))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlstore: %s: %w", op, s.schemaHint(ctx, err))
	}
	return n > 0, nil
}

// addedColumnsLookup is the column of the schema lookup (see
// schemaLookup) that tells which of addedColumns the table has: the sum of
// their bits, 1 << their index in addedColumns, over the rows of from that
// describe the table's columns, whose names are in name.
func addedColumnsLookup(from, name string) string {
	var b strings.Builder
	b.WriteString(`(SELECT COALESCE(SUM(CASE ` + name)
	for i, col := range addedColumns {
		fmt.Fprintf(&b, ` WHEN '%s' THEN %d`, col, 1<<i)
	}
	b.WriteString(` END), 0) FROM ` + from + `)`)
	return b.String()
}
