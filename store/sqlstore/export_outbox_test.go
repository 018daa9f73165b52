package sqlstore

import (
	"context"
	"strconv"
	"time"
)

// OutboxTable returns the name of s's outbox table.
func OutboxTable(s *Store) string { return s.ob.table.String() }

// OutboxWait returns how long message id of s's outbox stays untakeable
// on the database's clock: its lease_until less now.
func OutboxWait(ctx context.Context, s *Store, id string) (time.Duration, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 0, err
	}
	var ms int64
	q := `SELECT lease_until - ` + s.ob.now + ` FROM ` + s.ob.ref + ` WHERE id = ` + s.ob.ph(1)
	err = s.db.QueryRowContext(ctx, q, n).Scan(&ms)
	return time.Duration(ms) * time.Millisecond, err
}

// OutboxAddColumns returns the DDL that the error of an outbox table
// without the columns of dead messages advises.
func OutboxAddColumns(s *Store) []string { return s.ob.addColumns }
