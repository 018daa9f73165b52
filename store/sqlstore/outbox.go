package sqlstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/outbox"
)

// Outbox is the outbox of a Store with Options.Outbox: the source a relay
// (package relay) publishes from. It implements relay.Source, relay.Waker
// and relay.DeadLetters, and is safe for concurrent use, also by relays in
// other processes on the same database. A Take leases its messages in one
// short transaction and holds nothing open while the relay publishes; it
// never returns a message behind a held, backing-off or dead-and-holding
// message of its order key (outbox.OrderKey). A dead message stays in the
// table, out of the backlog, until Revive (docs/stores/sql.md, "The outbox").
type Outbox struct {
	s *Store
}

// Outbox returns the store's outbox: the table "<Table>_outbox", which
// the service's store (with Options.Outbox) creates. The relay's store
// need not set Options.Outbox; without the table, the methods fail with
// the database's error for a missing table.
func (s *Store) Outbox() *Outbox { return &Outbox{s: s} }

// errNoOutbox is the error of CompleteTx with messages on a store without
// an outbox.
var errNoOutbox = errors.New("the store has no outbox: set Options.Outbox (and call CreateTable) to enqueue messages")

// maxTake bounds one Take, so that its statements keep few placeholders.
const maxTake = 1000

// Take implements relay.Source.
func (o *Outbox) Take(ctx context.Context, n int, lease time.Duration) ([]outbox.Pending, error) {
	s := o.s
	if n <= 0 {
		return nil, fmt.Errorf("sqlstore: outbox take: n %d is not positive", n)
	}
	ms, err := leaseMillis(lease)
	if err != nil {
		return nil, err
	}
	token := newTakeToken()
	var out []outbox.Pending
	err = s.retry(ctx, func() error {
		var err error
		if s.spec.mysql {
			out, err = o.takeLocked(ctx, min(n, maxTake), ms, token)
		} else {
			out, err = o.takeOne(ctx, min(n, maxTake), ms, token)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: outbox take: %w", o.noTable(err))
	}
	return out, nil
}

// newTakeToken returns a random token for one Take.
func newTakeToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// beginTake begins a Take's transaction under READ COMMITTED (no gap locks
// on InnoDB; every statement sees the latest committed rows) and reads the
// database's clock in it (outboxSQL.clock), in ms.
func (o *Outbox) beginTake(ctx context.Context) (tx *sql.Tx, now int64, err error) {
	tx, err = o.s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, 0, err
	}
	if err := tx.QueryRowContext(ctx, o.s.ob.clock()).Scan(&now); err != nil {
		tx.Rollback()
		return nil, 0, err
	}
	return tx, now, nil
}

// takeLocked is Take on MySQL and MariaDB: it locks the candidates, keeps a
// message of an ordering key only behind one it keeps too (or the first of
// its key), leases what it keeps and commits.
func (o *Outbox) takeLocked(ctx context.Context, n int, ms int64, token string) ([]outbox.Pending, error) {
	s := o.s
	tx, now, err := o.beginTake(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // a no-op after Commit
	q, args := s.ob.takeLocked(n, now)
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []outbox.Pending
	kept := make(map[int64]bool)
	for rows.Next() {
		var (
			id   int64
			prev sql.NullInt64
			p    outbox.Pending
		)
		if err := o.scan(rows, &id, &p, &prev); err != nil {
			rows.Close()
			return nil, err
		}
		if prev.Valid && !kept[prev.Int64] {
			continue // behind a message of its key that this Take does not hold
		}
		kept[id] = true
		p.Token = token
		out = append(out, p)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, tx.Commit()
	}
	args = []any{token, ms}
	for _, p := range out {
		args = append(args, p.ID)
	}
	if _, err := tx.ExecContext(ctx, s.ob.lease(len(out)), args...); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return out, nil
}

// takeOne is Take on PostgreSQL and SQLite: the clock, then one UPDATE …
// RETURNING that chooses and leases; on PostgreSQL in one transaction, in
// which it also locks.
func (o *Outbox) takeOne(ctx context.Context, n int, ms int64, token string) ([]outbox.Pending, error) {
	s := o.s
	if s.dialect == SQLite {
		var now int64
		if err := s.db.QueryRowContext(ctx, s.ob.clock()).Scan(&now); err != nil {
			return nil, err
		}
		return o.takeReturning(ctx, s.db.QueryContext, s.ob.takeSQLite(), token, ms, n, now)
	}
	tx, now, err := o.beginTake(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // a no-op after Commit
	out, err := o.takeReturning(ctx, tx.QueryContext, s.ob.takePostgres(), token, ms, n, now)
	if err != nil {
		return nil, err
	}
	return out, tx.Commit()
}

// takeReturning runs q, an UPDATE … RETURNING of Take's columns whose
// arguments are token, ms, n and now, with query, and returns its rows in
// id order.
func (o *Outbox) takeReturning(ctx context.Context, query func(context.Context, string, ...any) (*sql.Rows, error), q string, token string, ms int64, n int, now int64) ([]outbox.Pending, error) {
	rows, err := query(ctx, q, token, ms, n, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type taken struct {
		id int64
		p  outbox.Pending
	}
	var got []taken
	for rows.Next() {
		var t taken
		if err := o.scan(rows, &t.id, &t.p); err != nil {
			return nil, err
		}
		t.p.Token = token
		got = append(got, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// RETURNING follows no ORDER BY.
	slices.SortFunc(got, func(a, b taken) int { return cmp.Compare(a.id, b.id) })
	out := make([]outbox.Pending, len(got))
	for i, t := range got {
		out[i] = t.p
	}
	return out, nil
}

// scan reads one row of a Take into id and p, and into extra those that
// follow.
func (o *Outbox) scan(rows *sql.Rows, id *int64, p *outbox.Pending, extra ...any) error {
	var (
		attrs  string
		waited int64
	)
	dest := append([]any{id, &p.Topic, &p.OrderingKey, &p.ChildKey, &p.Data, &attrs, &waited, &p.Attempts}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	p.ID = strconv.FormatInt(*id, 10)
	if err := json.Unmarshal([]byte(attrs), &p.Attributes); err != nil {
		return fmt.Errorf("message %s: attributes: %w", p.ID, err)
	}
	if p.Attributes == nil {
		p.Attributes = make(map[string]string, 1)
	}
	p.Attributes[outbox.ChildKeyAttribute] = p.ChildKey
	p.Waited = time.Duration(max(waited, 0)) * time.Millisecond
	return nil
}

// Settle implements relay.Source: it deletes sent and gives back failed,
// one statement per chunk of sent messages (on PostgreSQL one for all) and
// per kind of failure, in one transaction when there are several.
func (o *Outbox) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	s := o.s
	ids := make([]int64, len(sent))
	childKeys := make([]string, len(sent))
	for i, p := range sent {
		id, err := strconv.ParseInt(p.ID, 10, 64)
		if err != nil {
			return fmt.Errorf("sqlstore: outbox settle: message id %.40q is not this store's", p.ID)
		}
		ids[i], childKeys[i] = id, p.ChildKey
	}
	back, err := groupFailures(failed)
	if err != nil {
		return fmt.Errorf("sqlstore: outbox settle: %w", err)
	}
	stmts := s.ob.deleteSent(ids, childKeys)
	for _, g := range back {
		for rest := g.ids; len(rest) > 0; {
			chunk := rest[:min(len(rest), maxTake)]
			q, args := s.ob.giveBack(g.failure, chunk)
			stmts = append(stmts, statement{q, args})
			rest = rest[len(chunk):]
		}
	}
	err = s.retry(ctx, func() error {
		switch len(stmts) {
		case 0:
			return nil
		case 1:
			_, err := s.db.ExecContext(ctx, stmts[0].q, stmts[0].args...)
			return err
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	if err != nil {
		return fmt.Errorf("sqlstore: outbox settle: %w", err)
	}
	return nil
}

// Backlog implements relay.Source: it counts the outbox's live rows, the
// dead ones left out.
func (o *Outbox) Backlog(ctx context.Context) (int64, error) {
	s := o.s
	var n int64
	if err := s.db.QueryRowContext(ctx, s.ob.backlog()).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlstore: outbox backlog: %w", o.noTable(err))
	}
	return n, nil
}

// Stats implements relay.Stater: one statement that scans the outbox, as
// Backlog's count does.
func (o *Outbox) Stats(ctx context.Context) (outbox.Stats, error) {
	s := o.s
	var (
		st     outbox.Stats
		oldest sql.NullInt64
	)
	if err := s.db.QueryRowContext(ctx, s.ob.stats()).Scan(&st.Unsent, &oldest, &st.Dead); err != nil {
		return outbox.Stats{}, fmt.Errorf("sqlstore: outbox stats: %w", o.noTable(err))
	}
	st.Oldest = time.Duration(max(oldest.Int64, 0)) * time.Millisecond
	return st, nil
}

// Listen implements relay.Waker. On PostgreSQL through pgx's database/sql
// driver it LISTENs, on a connection of the store's *sql.DB that it closes
// when it returns, to the channel CompleteTx notifies on commit; give the
// *sql.DB at least two connections. Elsewhere it returns an error matching
// errors.ErrUnsupported, and the relay polls.
func (o *Outbox) Listen(ctx context.Context, wake func()) error {
	s := o.s
	if s.dialect != PostgreSQL {
		return fmt.Errorf("sqlstore: outbox listen: %v has no notifications: %w", s.dialect, errors.ErrUnsupported)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlstore: outbox listen: %w", err)
	}
	defer conn.Close()
	var lerr error
	conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			lerr = fmt.Errorf("the driver's connection (%T) is not pgx's: %w", dc, errors.ErrUnsupported)
			return nil
		}
		lerr = listen(ctx, pc.Conn(), s.ob.channel, wake)
		// The connection listens (or broke): it must not go back to
		// the pool.
		return driver.ErrBadConn
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("sqlstore: outbox listen: %w", lerr)
}

// listen LISTENs on channel over c and calls wake for each notification.
func listen(ctx context.Context, c *pgx.Conn, channel string, wake func()) error {
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	wake() // what committed before LISTEN was not signalled
	for {
		if _, err := c.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}

// enqueue writes msgs, prepared, in the transaction that exec runs
// statements in, and on PostgreSQL notifies the outbox's channel there; op
// names the caller in errors.
func (s *Store) enqueue(ctx context.Context, op string, exec func(q string, args ...any) error, msgs []outbox.Pending) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := s.insertMsgs(exec, msgs); err != nil {
		return fmt.Errorf("sqlstore: %s: enqueue: %w", op, err)
	}
	return nil
}

// insertMsgs is enqueue's work, its errors unwrapped.
func (s *Store) insertMsgs(exec func(q string, args ...any) error, msgs []outbox.Pending) error {
	const perStatement = 500
	for len(msgs) > 0 {
		chunk := msgs[:min(len(msgs), perStatement)]
		args := make([]any, 0, 6*len(chunk))
		for _, m := range chunk {
			attrs := make(map[string]string, len(m.Attributes))
			for k, v := range m.Attributes {
				if k != outbox.ChildKeyAttribute {
					attrs[k] = v
				}
			}
			js, err := json.Marshal(attrs)
			if err != nil {
				return err
			}
			var orderHash any // NULL: unordered
			if k := outbox.OrderKey(m.Topic, m.OrderingKey); k != "" {
				h, err := hex.DecodeString(k)
				if err != nil {
					return fmt.Errorf("order key %q: %w", k, err)
				}
				orderHash = h
			}
			data := m.Data
			if data == nil {
				data = []byte{} // NOT NULL
			}
			args = append(args, m.Topic, m.OrderingKey, orderHash, m.ChildKey, data, string(js))
		}
		if err := exec(s.ob.insert(len(chunk)), args...); err != nil {
			return err
		}
		msgs = msgs[len(chunk):]
	}
	if s.ob.channel != "" {
		return exec(`SELECT pg_notify($1, '')`, s.ob.channel)
	}
	return nil
}

// prepareMsgs checks msgs before CompleteTx sends anything.
func (s *Store) prepareMsgs(parent string, msgs []outbox.Message) ([]outbox.Pending, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	if !s.outbox {
		return nil, errNoOutbox
	}
	return outbox.Prepare(parent, msgs)
}
