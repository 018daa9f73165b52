package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Options configures a Store. The zero value means the defaults.
type Options struct {
	// Table is the table that holds the records: "name", or "schema.name"
	// (a database on MySQL, an attached database on SQLite). Each part is a
	// letter or '_' followed by at most 47 letters, digits or '_'; anything
	// else is rejected by New. Statements quote the names, so on PostgreSQL
	// they are case-sensitive. Default "idemgate_records".
	Table string

	// TTL is how long a completed record suppresses duplicates, and how long
	// a claimed record outlives its lease. A Claim's lease must be shorter
	// (store.ErrLeaseTooLong). Default 1h; rounded up to a whole
	// millisecond.
	TTL time.Duration

	// Outbox gives the store the transactional outbox "<Table>_outbox", which
	// CreateTable then creates (and TableExists checks) and where CompleteTx
	// enqueues messages. Default false: CompleteTx refuses messages.
	// [Store.Outbox] relays from the table either way.
	Outbox bool
}

const (
	defaultTable = "idemgate_records"
	defaultTTL   = time.Hour
)

// Store is a [store.Store], [store.Extender], [store.Failer],
// [store.Inspector] and [store.Lister] that keeps one row per key in a SQL
// table. It is safe for concurrent use.
type Store struct {
	db       *sql.DB
	dialect  Dialect
	spec     spec
	table    table
	q        statements
	ttl      int64 // milliseconds
	ttlDur   time.Duration
	prepared *stmtCache // nil: statements are sent as text
	// noWrite switches PostgreSQL's Claim to q.claimNoWrite, for good,
	// once the database has shown it runs above READ COMMITTED.
	noWrite atomic.Bool
	ob      *outboxSQL
	outbox  bool // Options.Outbox
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Extender = (*Store)(nil)
)

// New returns a Store that keeps its records in a table of db, written in
// dialect. A nil opts means the defaults. New does no I/O: create the table
// with [Store.CreateTable] or by hand (docs/stores/sql.md, "Schema"). The db
// is the caller's to configure and close.
func New(db *sql.DB, dialect Dialect, opts *Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlstore: nil *sql.DB")
	}
	sp, ok := dialect.spec()
	if !ok {
		return nil, fmt.Errorf("sqlstore: unknown dialect %v", dialect)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = defaultTable
	}
	t, err := parseTable(o.Table)
	if err != nil {
		return nil, err
	}
	switch {
	case o.TTL < 0:
		return nil, fmt.Errorf("sqlstore: negative TTL %v", o.TTL)
	case o.TTL == 0:
		o.TTL = defaultTTL
	}
	s := &Store{db: db, dialect: dialect, spec: sp, table: t, q: sp.build(t, ceilMillis(o.TTL)), ttl: ceilMillis(o.TTL), ttlDur: o.TTL}
	if sp.prepare {
		s.prepared = new(stmtCache)
	}
	s.ob, s.outbox = newOutboxSQL(dialect, t), o.Outbox
	return s, nil
}

// ceilMillis converts d to whole milliseconds, rounding up.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// leaseMillis checks a lease and converts it to whole milliseconds, rounding
// up so that a holder never gets less than it asked for.
func leaseMillis(lease time.Duration) (int64, error) {
	if lease < time.Millisecond {
		return 0, fmt.Errorf("sqlstore: lease %v is shorter than the store's 1ms resolution", lease)
	}
	return ceilMillis(lease), nil
}

// keyHash is the primary key of key's record: its SHA-256, because an index
// entry is limited (about 2.7 kB in PostgreSQL, 3 kB in InnoDB) while a key
// may be 64 KiB.
func keyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Claim implements [store.Store]. One statement decides and writes, on the
// database's clock (two on MySQL; see [MySQL]); a record found DONE or
// FAILED is answered from a read that writes nothing (on SQLite a
// statement of its own, before the upsert).
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Claim{}, err
	}
	opts, err := opts.Checked()
	if err != nil {
		return store.Claim{}, err
	}
	fp, origin := opts.Fingerprint, opts.Origin
	ms, err := leaseMillis(lease)
	if err != nil {
		return store.Claim{}, err
	}
	if err := store.CheckLease(lease, s.ttlDur); err != nil {
		return store.Claim{}, fmt.Errorf("sqlstore: claim: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("sqlstore: claim: %w", err)
	}
	// One token for every attempt: an attempt that committed but lost its
	// answer is re-affirmed by the next one, not taken for another holder.
	token := opts.ClaimToken()
	hash := keyHash(key)
	var fpArg, originArg any // NULL for none
	if fp != nil {
		fpArg = fp
	}
	if origin != "" {
		originArg = origin
	}
	var (
		fence, until       int64
		kept               []byte
		keptOrigin, reason sql.NullString
		failed             sql.NullInt64 // a FAILED record's attempts; NULL in other states
	)
	err = s.retry(ctx, func() error {
		return s.claimOnce(ctx, []any{&fence, &until, &kept, &keptOrigin, &failed, &reason}, hash, key, token, ms, fpArg, originArg)
	})
	if err != nil {
		return store.Claim{}, fmt.Errorf("sqlstore: claim: %w", s.schemaHint(ctx, err))
	}
	if len(kept) == 0 { // NULL, or an empty value written by hand: none
		kept = nil
	}
	c := store.Claim{Key: key, Fence: fence, Fingerprint: kept, Origin: keptOrigin.String}
	switch {
	case until > 0:
		c.Status, c.Token, c.LeaseUntil = store.Won, token, time.UnixMilli(until)
	case until < 0:
		c.Status, c.LeaseUntil = store.HeldByOther, time.UnixMilli(-until)
	case failed.Valid:
		c.Status, c.Attempts, c.Reason = store.AlreadyFailed, int(failed.Int64), reason.String
	default:
		c.Status = store.AlreadyDone
	}
	return c, nil
}

// claimOnce runs the claim statement once and scans claimResult into dest.
func (s *Store) claimOnce(ctx context.Context, dest []any, hash []byte, key, token string, lease int64, fp, origin any) (err error) {
	if s.q.claimFinal.text != "" {
		err = s.queryRow(ctx, s.q.claimFinal, dest, hash)
		if !errors.Is(err, sql.ErrNoRows) {
			return err // DONE or FAILED, or an error
		}
	}
	if s.q.claimRead.text == "" {
		q := s.q.claim
		if s.noWrite.Load() {
			q = s.q.claimNoWrite
		}
		err = s.queryRow(ctx, q, dest, hash, key, token, lease, fp, origin)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			err = errSnapshotRace
		case s.q.claimNoWrite.text != "" && pgState(err) == pgSerializationFailure:
			// The database runs above READ COMMITTED: from now on,
			// losers must not write (see pgClaimNoWrite).
			s.noWrite.Store(true)
		}
		return err
	}
	// MySQL: the upsert leaves its outcome in session variables, so both
	// statements must run on one connection.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, s.q.claim.text, s.q.claim.args(hash, key, token, lease, fp, origin)...); err != nil {
		return err
	}
	return conn.QueryRowContext(ctx, s.q.claimRead.text, s.q.claimRead.args(token)...).Scan(dest...)
}

// Complete implements [store.Store] in one statement. A FAILED record
// answers false, also to the claim whose Fail made it so.
func (s *Store) Complete(ctx context.Context, c store.Claim) (bool, error) {
	if err := store.CheckWon(c); err != nil {
		return false, fmt.Errorf("sqlstore: complete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("sqlstore: complete: %w", err)
	}
	hash := keyHash(c.Key)
	var done bool
	err := s.retry(ctx, func() error {
		res, err := s.exec(ctx, s.q.complete, hash, c.Fence, c.Token)
		if err != nil {
			return err
		}
		done, err = s.completed(res)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlstore: complete: %w", err)
	}
	return done, nil
}

// Release implements [store.Store] in one statement.
func (s *Store) Release(ctx context.Context, c store.Claim) error {
	if err := store.CheckWon(c); err != nil {
		return fmt.Errorf("sqlstore: release: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlstore: release: %w", err)
	}
	hash := keyHash(c.Key)
	err := s.retry(ctx, func() error {
		_, err := s.exec(ctx, s.q.release, hash, c.Fence, c.Token)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlstore: release: %w", s.schemaHint(ctx, err))
	}
	return nil
}

// Extend implements [store.Extender] in one statement. On SQLite an open
// transaction that holds the connection or the write lock makes it wait; an
// Extend that runs out of time there says so (and matches
// context.DeadlineExceeded). A transaction that calls [Store.CompleteTx]
// first ends the gateway's renewal.
func (s *Store) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	if err := store.CheckWon(c); err != nil {
		return store.Claim{}, fmt.Errorf("sqlstore: extend: %w", err)
	}
	ms, err := leaseMillis(lease)
	if err != nil {
		return store.Claim{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("sqlstore: extend: %w", err)
	}
	hash := keyHash(c.Key)
	var until int64 // 0: no live claim with c's fence
	err = s.retry(ctx, func() error {
		if s.spec.mysql {
			res, err := s.exec(ctx, s.q.extend, hash, c.Fence, ms, c.Token)
			if err != nil {
				return err
			}
			until, err = res.LastInsertId()
			return err
		}
		err := s.queryRow(ctx, s.q.extend, []any{&until}, hash, c.Fence, ms, c.Token)
		if errors.Is(err, sql.ErrNoRows) {
			until, err = 0, nil
		}
		return err
	})
	if err != nil {
		return store.Claim{}, fmt.Errorf("sqlstore: extend: %w", s.sqliteWaitHint(err))
	}
	if until == 0 {
		return store.Claim{}, store.ErrFenced
	}
	// The fence names one winning Claim call, so the record's token,
	// fingerprint and origin are c's.
	return store.Claim{Key: c.Key, Status: store.Won, Fence: c.Fence, Token: c.Token, LeaseUntil: time.UnixMilli(until), Fingerprint: c.Fingerprint, Origin: c.Origin}, nil
}
