package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/internal/record"
)

var _ store.Lister = (*Store)(nil)

// listSelect finds the keys of a page: live rows whose key, compared as
// bytes ({KB}), lies in the prefix's range ($1 ≤ key, key < $3 unless $2 is
// 0) after the cursor ($4), in the states asked for ($5 held, $6 lapsed, $7
// released, $8 done, $9 failed: 1 or 0) for at least the age asked for ($10
// µs for a fence, $11 ms), in byte order, $12 of them. It scans the table
// (docs/stores/sql.md, "Reading a record's state by hand").
const listSelect = `SELECT r.key_text
FROM (SELECT {NOW} AS ms) AS clock JOIN {T} AS r ON r.expires_at > clock.ms
WHERE {KB} >= $1 AND ($2 = 0 OR {KB} < $3) AND {KB} > $4
AND (
	($5 = 1 AND r.state = 1 AND r.token <> '' AND r.lease_until > clock.ms AND r.fence <= clock.ms * 1000 - $10)
	OR ($6 = 1 AND r.state = 1 AND r.token <> '' AND r.lease_until <= clock.ms AND r.lease_until <= clock.ms - $11)
	OR ($7 = 1 AND r.state = 1 AND r.token = '' AND r.lease_until <= clock.ms - $11)
	OR ($8 = 1 AND r.state = 2 AND r.lease_until <= clock.ms - $11)
	OR ($9 = 1 AND r.state = 3 AND r.lease_until <= clock.ms - $11)
)
ORDER BY {KB}
LIMIT $12`

// List implements [store.Lister]: one SELECT finds the page's keys, then
// each record is read as [Store.Inspect] reads it (1 + Limit statements at
// most). A record that changed between the two reads is listed as the
// second finds it, or left out. The SELECT scans the whole table: fine for
// an operator, not for a dashboard (docs/stores/sql.md, "Reading a record's
// state by hand").
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListPage, error) {
	o, err := opts.Check()
	if err != nil {
		return store.ListPage{}, err
	}
	var after []byte
	if o.Cursor != "" {
		p, err := record.DecodeCursor(o.Cursor, 1)
		if err != nil {
			return store.ListPage{}, fmt.Errorf("sqlstore: list: %w", err)
		}
		after = []byte(p[0])
	}
	if err := ctx.Err(); err != nil {
		return store.ListPage{}, fmt.Errorf("sqlstore: list: %w", err)
	}
	upper, bounded := successor(o.Prefix)
	var keys []string
	err = s.retry(ctx, func() error {
		keys, err = s.listKeys(ctx, []any{
			[]byte(o.Prefix), flag(bounded), upper, orEmpty(after),
			flag(o.States&store.StateHeld != 0), flag(o.States&store.StateLapsed != 0),
			flag(o.States&store.StateReleased != 0), flag(o.States&store.StateDone != 0),
			flag(o.States&store.StateFailed != 0),
			ceilDiv(o.OlderThan, time.Microsecond), ceilDiv(o.OlderThan, time.Millisecond),
			int64(o.Limit + 1),
		})
		return err
	})
	if err != nil {
		return store.ListPage{}, fmt.Errorf("sqlstore: list: %w", err)
	}
	var page store.ListPage
	if len(keys) > o.Limit {
		keys = keys[:o.Limit]
		page.Next = record.EncodeCursor(keys[len(keys)-1])
	}
	for _, k := range keys {
		r, ok, err := s.Inspect(ctx, k)
		if err != nil {
			return store.ListPage{}, fmt.Errorf("sqlstore: list: %w", err)
		}
		if ok && o.Match(r) {
			page.Records = append(page.Records, r)
		}
	}
	return page, nil
}

// listKeys runs listSelect with args.
func (s *Store) listKeys(ctx context.Context, args []any) ([]string, error) {
	kb := `convert_to(r.key_text, 'UTF8')`
	switch {
	case s.spec.mysql:
		kb = `CAST(r.key_text AS BINARY)`
	case s.spec.prepare:
		kb = `CAST(r.key_text AS BLOB)`
	}
	q := s.render(expand(listSelect, "KB", kb))
	var (
		rows *sql.Rows
		err  error
	)
	if s.prepared == nil {
		rows, err = s.db.QueryContext(ctx, q.text, q.args(args...)...)
	} else {
		var st *sql.Stmt
		if st, err = s.prepared.get(ctx, s.db, q.text); err == nil {
			rows, err = st.QueryContext(ctx, q.args(args...)...)
		}
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// successor returns the least byte string above every string that starts
// with prefix, and false when there is none (prefix is empty or all 0xff).
func successor(prefix string) ([]byte, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return b[:i+1], true
		}
	}
	return []byte{}, false
}

func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// orEmpty returns b, or an empty (not nil, which would be NULL) slice.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ceilDiv returns d in units, rounded up.
func ceilDiv(d, unit time.Duration) int64 {
	return int64((d + unit - 1) / unit)
}
