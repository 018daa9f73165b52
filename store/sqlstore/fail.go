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

// failureColumns are the columns that keep a record's failures
// (store.Failer): its count of failed attempts, the last one's reason and
// the first one's instant (epoch milliseconds). All three are NULL on a
// record without failures, so that tables made before them need no
// rewrite and a record that never failed costs nothing more.
var failureColumns = [...]string{"attempts", "reason", "first_failure"}

// allFailures is the schema lookup's answer for a table that has all of
// failureColumns.
const allFailures = 1<<len(failureColumns) - 1

// addColumns returns the DDL that adds each of failureColumns to tbl,
// with the types given in their order.
func addColumns(tbl string, types ...string) []string {
	ddls := make([]string, len(failureColumns))
	for i, col := range failureColumns {
		ddls[i] = `ALTER TABLE ` + tbl + ` ADD COLUMN ` + col + ` ` + types[i]
	}
	return ddls
}

// failUpdate records a failed attempt of the claim that owns a live
// CLAIMED record (fence $2, token $3), in one statement that PostgreSQL
// and SQLite share: the count rises by one, the reason becomes $4, and the
// first failure is kept, or is now. When the new count reaches $5 (0:
// never; see failAt) the record goes FAILED under the same fence, its
// lease ending now and its expiry a ttl later, like a completion;
// otherwise the claim is released as releaseUpdate releases it. Either
// way the token goes, so that no Complete, Release or Extend of the claim
// matches the record again, and a FAILED record keeps the fingerprint,
// which Claim answers with. RETURNING gives the count and the state.
//
// A live FAILED record under fence $2 matches too, whatever the token,
// and is left as it is: that is a Fail retried after its reply was lost,
// which answers as the first one did. (It costs a row version that
// changes nothing, as a retried Complete does.)
//
// The sub-select reads the clock once and takes the verdict (f.failed)
// once, so a final first failure's first_failure and lease_until are one
// instant (store.Record.FailedAt).
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

// failAt is the count of failed attempts at which f makes a record
// FAILED, as f.FailedAttempts decides, for the statements to compare the
// new count with: 1 when f is final, f.MaxAttempts when positive, and 0
// for never. A budget above what the count column holds (a 32-bit
// integer) can never be spent, so it is never too.
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

// missingFailures returns the DDL that adds the failure columns that
// present (a bit per failureColumns entry, from the schema lookup) lacks,
// and their names.
func (s *Store) missingFailures(present int) (ddls, cols []string) {
	for i, col := range failureColumns {
		if present&(1<<i) == 0 {
			ddls, cols = append(ddls, s.q.addFailures[i]), append(cols, col)
		}
	}
	return ddls, cols
}

// failureColumnsLookup is the column of the schema lookup (see
// schemaLookup) that tells which failure columns the table has: the sum of
// their bits, 1 << their index in failureColumns, over the rows of from
// that describe the table's columns, whose names are in name.
func failureColumnsLookup(from, name string) string {
	var b strings.Builder
	b.WriteString(`(SELECT COALESCE(SUM(CASE ` + name)
	for i, col := range failureColumns {
		fmt.Fprintf(&b, ` WHEN '%s' THEN %d`, col, 1<<i)
	}
	b.WriteString(` END), 0) FROM ` + from + `)`)
	return b.String()
}
