package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/outbox"
)

// maxReason is how many bytes of a failure's reason the outbox keeps.
const maxReason = 512

// maxAfter bounds a failure's backoff, so that now + After stays far
// from the column's limit (and below deadHolds).
const maxAfter = 100 * 365 * 24 * time.Hour

// failure is one kind of outbox.Failure: those of one Take that Settle
// gives back alike, in one statement.
type failure struct {
	token         string
	reason        string // kept and counted unless ""
	after         int64  // ms, for a live message
	dead, release bool
}

// failureGroup is the messages (ids) of one kind of failure.
type failureGroup struct {
	failure
	ids []any
}

// groupFailures sorts failed into kinds, in the order each kind first
// comes.
func groupFailures(failed []outbox.Failure) ([]failureGroup, error) {
	var groups []failureGroup
	at := make(map[failure]int)
	for _, f := range failed {
		id, err := strconv.ParseInt(f.ID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("message id %.40q is not this store's", f.ID)
		}
		k := failure{token: f.Token, reason: cutReason(f.Reason), dead: f.Dead}
		if f.Dead {
			k.release = f.Release
		} else {
			k.after = ceilMillis(min(max(f.After, 0), maxAfter))
		}
		i, ok := at[k]
		if !ok {
			i = len(groups)
			at[k] = i
			groups = append(groups, failureGroup{failure: k})
		}
		groups[i].ids = append(groups[i].ids, id)
	}
	return groups, nil
}

// cutReason makes r fit the reason column: valid UTF-8 without NUL
// (which PostgreSQL's text refuses), at most maxReason bytes, cut between
// two characters. A reason that is not empty stays so.
func cutReason(r string) string {
	if r == "" {
		return ""
	}
	r = strings.ReplaceAll(strings.ToValidUTF8(r, "\uFFFD"), "\x00", "\uFFFD")
	if len(r) > maxReason {
		n := maxReason
		for n > 0 && !utf8.RuneStart(r[n]) {
			n--
		}
		r = r[:n]
	}
	return r
}

// Dead implements relay.DeadLetters: the dead messages, by the time they
// died on the database's clock (then by enqueue order). It reads the
// whole table, which dead messages should keep small.
func (o *Outbox) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	s := o.s
	if n <= 0 {
		return nil, fmt.Errorf("sqlstore: outbox dead: n %d is not positive", n)
	}
	rows, err := s.db.QueryContext(ctx, s.ob.dead(), min(n, maxTake))
	if err != nil {
		return nil, fmt.Errorf("sqlstore: outbox dead: %w", o.noTable(err))
	}
	defer rows.Close()
	var out []outbox.DeadMessage
	for rows.Next() {
		var (
			id          int64
			d           outbox.DeadMessage
			died, until int64
		)
		if err := o.scan(rows, &id, &d.Pending, &d.Reason, &died, &until); err != nil {
			return nil, fmt.Errorf("sqlstore: outbox dead: %w", err)
		}
		d.Died = time.UnixMilli(died)
		d.Holds = until > 0
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: outbox dead: %w", err)
	}
	return out, nil
}

// Revive implements relay.DeadLetters: the dead messages of ids become
// takeable at once, in their place in their key's order, with no
// attempts; their last reason stays until a failure replaces it. An ID
// that is not this store's is skipped like one of no dead message.
func (o *Outbox) Revive(ctx context.Context, ids ...string) (int, error) {
	s := o.s
	var args []any
	for _, id := range ids {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			args = append(args, n)
		}
	}
	var revived int64
	err := s.retry(ctx, func() error {
		revived = 0
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		for rest := args; len(rest) > 0; {
			chunk := rest[:min(len(rest), maxTake)]
			res, err := tx.ExecContext(ctx, s.ob.revive(len(chunk)), chunk...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			revived += n
			rest = rest[len(chunk):]
		}
		return tx.Commit()
	})
	if err != nil {
		return 0, fmt.Errorf("sqlstore: outbox revive: %w", err)
	}
	return int(revived), nil
}
