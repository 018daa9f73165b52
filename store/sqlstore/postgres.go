package sqlstore

import "strconv"

// PostgreSQL and SQLite share the statements below (PostgreSQL has a second
// Claim, pgClaimNoWrite, and SQLite runs finalRead and claimUpsert as two
// statements where PostgreSQL joins them in pgClaim); they also differ in their clock, in the name of
// the two-argument maximum, in the DDL and in how a purge picks its batch.
//
// {NOW} is the database clock in epoch milliseconds, read when the
// expression is evaluated. A fence-raising write sets the fence to
// {MAX}(fence + 1, {NOW} * 1000), and a new record starts at {NOW} * 1000:
// store.FenceAt on the database's clock, counted in microseconds but read to
// the millisecond. A record made anew after a purge deleted its predecessor
// (which happens at least a ttl after its last raise) therefore starts above
// every fence the predecessor handed out, unless the database's clock has
// stepped back by a ttl or a key took more than a thousand raises a
// millisecond for a long stretch. Every decision is evaluated on a row the
// statement has locked, after any wait for a concurrent writer, so the clock
// must be read then, not when the statement began: a Claim that queued
// behind a Release must see the lease the Release just ended as ended.
// PostgreSQL therefore reads clock_timestamp(), not statement_timestamp()
// or now(); SQLite's 'now' is fixed for one sqlite3_step, which starts once
// the statement holds the write lock (TestSQLiteClockFixedPerStep).
//
// Because PostgreSQL's clock moves between two readings in one statement, a
// statement must decide once: one reading, one verdict, and every column
// it writes follows that verdict and counts its instants from that reading
// (the Claim below reads the clock in a sub-select, once). Complete,
// Release and Extend test the clock in their WHERE and write an instant in
// their SET, two readings that PostgreSQL cannot share without taking the
// first before the row lock; their one clock verdict, "the record has not
// expired", is taken first and the instant they write is at most a few
// microseconds later, within the same lock.

// claimResult is what every Claim statement answers besides the fence and
// the fingerprint and origin the record keeps: the record's lease as the
// caller ($3) sees it, packed in one number. It is 0
// when the record is DONE or FAILED, lease_until when the caller's token holds the
// claim (a win, a takeover or a retried win) and -lease_until when another
// token does (lease_until is epoch milliseconds, never 0). Two integer
// columns cost the driver less than the four they stand for: about 3% of
// PostgreSQL's throughput, measured (docs/benchmarks.md). The last two
// columns are for a FAILED record: its attempt count, which is NULL in
// every other state and so tells FAILED from DONE, and its reason (kept
// by a CLAIMED record too, whose Claim ignores it). A record without
// failures answers two NULLs, the least a column costs.
const claimResult = `fence, CASE WHEN state <> 1 THEN 0 WHEN token = $3 THEN lease_until ELSE -lease_until END, fingerprint, origin,
	CASE WHEN state = 3 THEN attempts END, reason`

// finalRead finds the record of key $1 when it is DONE or FAILED and has
// not expired, and answers as claimResult does for it (fence, 0,
// fingerprint, origin, and a FAILED record's attempts and reason). Such a
// record is final until it expires or an operator forgets (or retries) it,
// so a Claim that finds one needs no lock and writes nothing: PostgreSQL's Claims read
// it first in the same statement (pgClaim, pgClaimNoWrite), SQLite's as a
// statement of its own (Store.claimOnce). The clock is read after the
// snapshot, so a record unexpired at that reading was unexpired when the
// snapshot was taken: the answer is the record as the snapshot shows it,
// and a Forget that committed before the statement began is in that
// snapshot (TestDuplicateClaimWritesNothing, and the conformance suite's
// linearizability check).
const finalRead = `SELECT fence, 0 AS until, fingerprint, origin, CASE WHEN state = 3 THEN attempts END, reason
FROM {T} WHERE key_hash = $1 AND state >= 2 AND expires_at > {NOW}`

// claimUpsert claims a key in one statement that returns a row in every
// case it runs ({FIRST} holds; on PostgreSQL see pgClaim, on SQLite it
// always holds; MariaDB's ON DUPLICATE KEY form in mysql.go is the same
// idea). The INSERT creates an absent record at fence clock.ms * 1000 with
// the caller's fingerprint ($5) and origin ($6), NULL for none, its lease and expiry from
// one reading of the clock. On a conflict, the DO
// UPDATE always updates the existing row, and decides once: the sub-select
// reads the clock once (clock.ms), after the row lock, and every column
// follows the one verdict {WIN} takes on that reading, the new lease and
// expiry counting from it too. {WIN} holds when the record has expired, or
// is a claim whose lease has lapsed and that another Claim call won; else
// every column keeps its value. RETURNING then shows the record as it now
// stands, and the caller won exactly when it is CLAIMED with the caller's
// token: a fresh win, a takeover, or a retry of the caller's own Claim,
// which {WIN} leaves untouched. (The INSERT's reading, taken before any
// wait for the row lock, is discarded on a conflict.) The failures a
// record keeps (attempts, reason, first_failure) stay unless it has
// expired: the winner of a released or lapsed claim inherits its
// predecessors' count (see store.Failer), the winner of an expired record
// starts afresh, and a record that is not won keeps them anyway. An
// expired record is always won, so that test needs no {WIN}; a new record
// starts with none (NULL).
//
// Deciding per column instead, CASE WHEN {WIN} in each assignment, would
// read the clock once per column on PostgreSQL, whose clock_timestamp()
// moves between readings: a lease lapsing between two of them left a row
// half old claim, half new (the old fence with the new token, say: two
// owners of one fence). TestClaimDecidesOnce stages exactly that on a
// clock that steps on every reading. The sub-select is a volatile one, so
// the planner evaluates it once per row rather than inlining it into each
// column.
//
// On PostgreSQL the update of a held record writes a row version that
// changes nothing (a heap-only one: no indexed column changes). Under READ
// COMMITTED, the default, that is the whole cost, and the statement needs
// neither a snapshot of its own nor a retry. Under REPEATABLE READ or
// SERIALIZABLE it is not: see pgClaimNoWrite. A DONE or FAILED record
// seldom gets here: finalRead answers for it first. SQLite runs one writer at a time,
// so there the update of a held record costs no more than the read it
// replaces. (SQLite needs the WHERE of the INSERT's SELECT to parse ON
// CONFLICT as the upsert's.)
const claimUpsert = `INSERT INTO {T} AS r (key_hash, key_text, state, fence, token, lease_until, expires_at, fingerprint, origin)
SELECT $1, $2, 1, clock.ms * 1000, $3, clock.ms + $4, clock.ms + $4 + {TTL}, $5, $6 FROM (SELECT {NOW} AS ms) AS clock WHERE {FIRST}
ON CONFLICT (key_hash) DO UPDATE SET (state, fence, token, lease_until, expires_at, fingerprint, origin, attempts, reason, first_failure) = (
	SELECT
		CASE WHEN {WIN} THEN 1 ELSE r.state END,
		CASE WHEN {WIN} THEN {MAX}(r.fence + 1, clock.ms * 1000) ELSE r.fence END,
		CASE WHEN {WIN} THEN excluded.token ELSE r.token END,
		CASE WHEN {WIN} THEN clock.ms + $4 ELSE r.lease_until END,
		CASE WHEN {WIN} THEN clock.ms + $4 + {TTL} ELSE r.expires_at END,
		CASE WHEN {WIN} THEN excluded.fingerprint ELSE r.fingerprint END,
		CASE WHEN {WIN} THEN excluded.origin ELSE r.origin END,
		` + keptFailures + `
	FROM (SELECT {NOW} AS ms) AS clock
)
RETURNING ` + claimResult

// keptFailures are the failures a claim of record r keeps at the instant
// clock.ms: all of them, unless r has expired (see claimUpsert).
const keptFailures = `CASE WHEN r.expires_at > clock.ms THEN r.attempts END,
		CASE WHEN r.expires_at > clock.ms THEN r.reason END,
		CASE WHEN r.expires_at > clock.ms THEN r.first_failure END`

// pgClaim is PostgreSQL's Claim under READ COMMITTED: finalRead, and only
// when it finds no DONE or FAILED record, claimUpsert. A data-modifying WITH runs
// whether or not the query reads it, so the condition sits in the INSERT's
// own SELECT: on a duplicate it yields no row, the INSERT attempts nothing,
// and the statement takes no row lock, writes no row version and no WAL,
// and commits without an xid. A record that became DONE or FAILED after
// the snapshot (a Complete or Fail that committed while the statement
// started) is invisible to finalRead; the upsert then meets it on its conflict and answers as before,
// with a version that changes nothing.
const pgClaim = `WITH seen AS (
	` + finalRead + `
), claimed AS (
	` + claimUpsert + `
)
SELECT * FROM seen
UNION ALL
SELECT * FROM claimed`

// claimWins is {WIN}: the claim in excluded takes over the record r at the
// instant clock.ms.
const claimWins = `(r.expires_at <= clock.ms OR (r.state = 1 AND r.lease_until <= clock.ms AND r.token <> excluded.token))`

// pgClaimNoWrite is PostgreSQL's Claim for a database that runs statements
// under REPEATABLE READ or SERIALIZABLE (a default some teams set). There,
// every ON CONFLICT that meets a row version its snapshot cannot see fails
// with a serialization error; if losers wrote no-op versions, as
// claimUpsert's do, each would invalidate the snapshots of all the other
// contenders of a hot key, and their retries would chase each other. This
// form writes only when the caller wins ({WIN}), so a held record stays
// unchanged while it is held and one retry settles. A store switches to it
// for good at its first serialization failure, which the other isolation
// levels never raise (see Store.claimOnce).
//
// A DONE or FAILED record is answered by finalRead first, as in pgClaim: the INSERT
// then attempts nothing, and kept reads nothing, so a duplicate takes no
// lock and writes nothing. Otherwise, when the caller does not win, ON
// CONFLICT has still locked the row's latest version, and kept returns
// that row so that the statement answers in every case. kept must not read the statement's snapshot, which under
// READ COMMITTED was taken when the statement began: it would show an older
// version of a row that another Claim has since updated (and, say, report a
// takeover's CLAIMED record as the DONE one it replaced). FOR UPDATE makes
// it follow the row to its latest version instead, which we already hold
// locked, so it does not wait. One case remains: a row inserted by a
// concurrent Claim after the snapshot was taken is invisible to kept
// altogether, although ON CONFLICT found it. The statement then returns no
// row, and the store runs it again (see errSnapshotRace); the new snapshot
// sees the row.
//
// The verdict, in the WHERE, and the new lease and expiry, in the SET, are
// two sub-selects, each reading the clock once after the row lock, in that
// order: PostgreSQL offers no way for them to share a reading. The outcome
// is still that of one reading. A refusal reads the clock once (the SET is
// not evaluated); a takeover is that of the second reading, because a
// takeover allowed at the first is allowed at any later one (a lapsed lease
// stays lapsed, an expired record stays expired) and the row is locked in
// between; the failures kept follow the second reading too.
const pgClaimNoWrite = `WITH seen AS (
	` + finalRead + `
), claimed AS (
	INSERT INTO {T} AS r (key_hash, key_text, state, fence, token, lease_until, expires_at, fingerprint, origin)
	SELECT $1, $2, 1, clock.ms * 1000, $3, clock.ms + $4, clock.ms + $4 + {TTL}, $5, $6 FROM (SELECT {NOW} AS ms) AS clock
	WHERE NOT EXISTS (SELECT FROM seen)
	ON CONFLICT (key_hash) DO UPDATE SET (state, fence, token, lease_until, expires_at, fingerprint, origin, attempts, reason, first_failure) = (
		SELECT 1, {MAX}(r.fence + 1, clock.ms * 1000), excluded.token, clock.ms + $4, clock.ms + $4 + {TTL}, excluded.fingerprint, excluded.origin,
		` + keptFailures + `
		FROM (SELECT {NOW} AS ms) AS clock
	)
	WHERE (SELECT {WIN} FROM (SELECT {NOW} AS ms) AS clock)
	RETURNING state, fence, token, lease_until, fingerprint, origin, attempts, reason
), kept AS (
	SELECT state, fence, token, lease_until, fingerprint, origin, attempts, reason FROM {T}
	WHERE key_hash = $1 AND NOT EXISTS (SELECT FROM seen) AND NOT EXISTS (SELECT FROM claimed)
	FOR UPDATE
)
SELECT * FROM seen
UNION ALL
SELECT ` + claimResult + ` FROM claimed
UNION ALL
SELECT ` + claimResult + ` FROM kept`

// completeUpdate marks a matching, unexpired record DONE: the caller's
// fence ($2), and on a CLAIMED record the caller's token ($3). A DONE
// record needs no token: its fence names the claim that completed it, since
// fences never repeat. A FAILED record never matches, not even under the
// fence of the claim that failed it: the work is known to have failed. The lease ends at the completion, which lease_until
// then records (store.Record.CompletedAt), and the record expires a ttl
// later, both from one reading of the clock. On a record that is already
// DONE (a retried Complete) it changes nothing but still counts as an
// affected row, which is the "true" answer.
const completeUpdate = `UPDATE {T} SET
	state = 2,
	(lease_until, expires_at) = (
		SELECT CASE WHEN state = 1 THEN clock.ms ELSE lease_until END, CASE WHEN state = 1 THEN clock.ms + {TTL} ELSE expires_at END
		FROM (SELECT {NOW} AS ms) AS clock
	)
WHERE key_hash = $1 AND fence = $2 AND (state = 2 OR state = 1 AND token = $3) AND expires_at > {NOW}`

// completeTxUpdate is completeUpdate for a claim completed inside the
// caller's transaction: it matches a CLAIMED record only. A record DONE
// already under the caller's fence is no retry there but a transaction run
// a second time, which must not commit (see Store.CompleteTx).
const completeTxUpdate = `UPDATE {T} SET
	state = 2,
	(lease_until, expires_at) = (SELECT clock.ms, clock.ms + {TTL} FROM (SELECT {NOW} AS ms) AS clock)
WHERE key_hash = $1 AND fence = $2 AND token = $3 AND state = 1 AND expires_at > {NOW}`

// recordStateSelect is statements.recordState, in every dialect.
const recordStateSelect = `SELECT state, fence, token, CASE WHEN expires_at > {NOW} THEN 1 ELSE 0 END FROM {T} WHERE key_hash = $1`

// releaseUpdate abandons a matching live claim (the caller's fence and
// token): the lease ends now, the fence rises, so the released claim can
// never complete, the token is cleared, so that a Claim retried with it
// takes the key anew instead of re-affirming the claim it gave up, and so
// is the fingerprint, which belonged to the claim; the origin stays, naming
// the last holder. The record then lives at
// least a ttl more, so that a purge deletes it no sooner than a ttl after
// the fence it now holds.
const releaseUpdate = `UPDATE {T} SET
	fence       = {MAX}(fence + 1, {NOW} * 1000),
	token       = '',
	fingerprint = NULL,
	lease_until = {NOW},
	expires_at  = {MAX}(expires_at, {NOW} + {TTL})
WHERE key_hash = $1 AND fence = $2 AND token = $3 AND state = 1 AND expires_at > {NOW}`

// extendUpdate moves a matching live claim's lease (the caller's fence and
// token, $4), and its expiry with it.
const extendUpdate = `UPDATE {T} SET
	(lease_until, expires_at) = (
		SELECT clock.ms + $3, {MAX}(expires_at, clock.ms + $3 + {TTL}) FROM (SELECT {NOW} AS ms) AS clock
	)
WHERE key_hash = $1 AND fence = $2 AND token = $4 AND state = 1 AND expires_at > {NOW}
RETURNING lease_until`

// upsertStatements renders the statements PostgreSQL and SQLite share, and
// returns the renderer for their own.
func upsertStatements(tbl, now, maxFunc string, ttl int64) (statements, func(string) query) {
	x := func(tmpl string) query {
		return numbered(expand(tmpl, "WIN", claimWins, "T", tbl, "NOW", now, "TTL", strconv.FormatInt(ttl, 10), "MAX", maxFunc))
	}
	return statements{
		complete:    x(completeUpdate),
		completeTx:  x(completeTxUpdate),
		recordState: x(recordStateSelect),
		release:     x(releaseUpdate),
		extend:      x(extendUpdate),
		fail:        x(failUpdate),
	}, x
}

// pgNow is PostgreSQL's clock in epoch milliseconds, read when evaluated.
const pgNow = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

func postgresStatements(t table, ttl int64) statements {
	tbl := t.ref(doubleQuote)
	s, x := upsertStatements(tbl, pgNow, "GREATEST", ttl)
	s.claim = x(expand(pgClaim, "FIRST", "NOT EXISTS (SELECT FROM seen)"))
	s.claimNoWrite = x(pgClaimNoWrite)
	// A purge locks its batch with SKIP LOCKED, so it never waits for (or
	// blocks) a Claim in flight on a record it picked. The outer condition
	// is checked again on the row's latest version.
	s.purge = x(`DELETE FROM {T} WHERE key_hash IN (
	SELECT key_hash FROM {T} WHERE expires_at < {NOW}
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
) AND expires_at < {NOW}`)
	s.create = []string{
		`CREATE TABLE IF NOT EXISTS ` + tbl + ` (
	key_hash    bytea    PRIMARY KEY,
	key_text    text     NOT NULL,
	state       smallint NOT NULL,
	fence       bigint   NOT NULL,
	token       text     NOT NULL,
	lease_until bigint   NOT NULL,
	expires_at  bigint   NOT NULL,
	fingerprint bytea,
	origin      text,
	attempts    integer,
	reason      text,
	first_failure bigint
)`,
		// The index is created in the table's schema; its name is not
		// qualified.
		`CREATE INDEX IF NOT EXISTS ` + doubleQuote(t.index()) + ` ON ` + tbl + ` (expires_at)`,
	}
	s.addColumn = `ALTER TABLE ` + tbl + ` ADD COLUMN fingerprint bytea`
	s.addOrigin = `ALTER TABLE ` + tbl + ` ADD COLUMN origin text`
	s.addFailures = addColumns(tbl, "integer", "text", "bigint")
	return s
}
