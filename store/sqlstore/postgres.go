package sqlstore

import "strconv"

// The statements of PostgreSQL, most of them shared with SQLite. {NOW} is the
// database clock in epoch milliseconds, read after the row lock; a statement
// decides on one reading (docs/stores/sql.md, "How the statements read the
// clock").

// claimResult is what every Claim answers besides the fence and the record's
// fingerprint and origin: its lease as the caller ($3) sees it, in one number
// (0: DONE or FAILED; lease_until: the caller's token holds the claim;
// -lease_until: another's), then a FAILED record's attempts (NULL in every
// other state, which tells FAILED from DONE) and its reason.
const claimResult = `fence, CASE WHEN state <> 1 THEN 0 WHEN token = $3 THEN lease_until ELSE -lease_until END, fingerprint, origin,
	CASE WHEN state = 3 THEN attempts END, reason`

// finalRead answers for a DONE or FAILED, unexpired record of key $1 as
// claimResult does, without a lock or a write: such a record is final until
// it expires or is forgotten. The clock is read after the snapshot, so the
// answer is the record as the snapshot shows it (docs/stores/sql.md, "A
// duplicate writes nothing").
const finalRead = `SELECT fence, 0 AS until, fingerprint, origin, CASE WHEN state = 3 THEN attempts END, reason
FROM {T} WHERE key_hash = $1 AND state >= 2 AND expires_at > {NOW}`

// claimUpsert claims key $1 in one statement that returns a row whenever
// {FIRST} holds: an absent record is inserted with the caller's token ($3),
// lease ($4), fingerprint ($5) and origin ($6); on a conflict every column
// follows the one verdict {WIN} takes on one reading of the clock
// (docs/stores/sql.md, "Deciding once"), and failures are kept unless the
// record expired. The caller won when RETURNING shows its token on a
// CLAIMED record. (SQLite needs the WHERE to parse ON CONFLICT as the
// upsert's.)
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

// keptFailures are the failures a claim of record r keeps at clock.ms: all,
// unless r has expired.
const keptFailures = `CASE WHEN r.expires_at > clock.ms THEN r.attempts END,
		CASE WHEN r.expires_at > clock.ms THEN r.reason END,
		CASE WHEN r.expires_at > clock.ms THEN r.first_failure END`

// pgClaim is PostgreSQL's Claim under READ COMMITTED: finalRead, then, only
// when it found nothing, claimUpsert. The condition sits in the INSERT's own
// SELECT because a data-modifying WITH runs whether or not it is read; a
// duplicate then takes no lock and writes nothing.
const pgClaim = `WITH seen AS (
	` + finalRead + `
), claimed AS (
	` + claimUpsert + `
)
SELECT * FROM seen
UNION ALL
SELECT * FROM claimed`

// claimWins is {WIN}: the claim in excluded takes over record r at clock.ms.
const claimWins = `(r.expires_at <= clock.ms OR (r.state = 1 AND r.lease_until <= clock.ms AND r.token <> excluded.token))`

// pgClaimNoWrite is the Claim a store switches to for good at its first
// serialization failure (REPEATABLE READ or SERIALIZABLE): only a winner
// writes, so losers invalidate no other contender's snapshot. kept reads a
// lost record FOR UPDATE, at its latest version; a row inserted after the
// snapshot yields no row at all, and the store runs the statement again
// (errSnapshotRace). See docs/stores/sql.md, "Claim".
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

// completeUpdate marks an unexpired record DONE under the caller's fence ($2)
// and, while CLAIMED, token ($3); a FAILED record never matches. A retried
// Complete on its own DONE record changes nothing and still counts as an
// affected row (true). lease_until records the completion
// (store.Record.CompletedAt).
const completeUpdate = `UPDATE {T} SET
	state = 2,
	(lease_until, expires_at) = (
		SELECT CASE WHEN state = 1 THEN clock.ms ELSE lease_until END, CASE WHEN state = 1 THEN clock.ms + {TTL} ELSE expires_at END
		FROM (SELECT {NOW} AS ms) AS clock
	)
WHERE key_hash = $1 AND fence = $2 AND (state = 2 OR state = 1 AND token = $3) AND expires_at > {NOW}`

// completeTxUpdate is completeUpdate for CompleteTx: it matches a CLAIMED
// record only, since a record DONE already under the caller's fence means a
// transaction run twice, which must not commit.
const completeTxUpdate = `UPDATE {T} SET
	state = 2,
	(lease_until, expires_at) = (SELECT clock.ms, clock.ms + {TTL} FROM (SELECT {NOW} AS ms) AS clock)
WHERE key_hash = $1 AND fence = $2 AND token = $3 AND state = 1 AND expires_at > {NOW}`

// recordStateSelect is statements.recordState, in every dialect.
const recordStateSelect = `SELECT state, fence, token, CASE WHEN expires_at > {NOW} THEN 1 ELSE 0 END FROM {T} WHERE key_hash = $1`

// releaseUpdate abandons a live claim (fence $2, token $3): the lease ends,
// the fence rises so the claim can never complete, the token and fingerprint
// go (a Claim retried with the token takes the key anew), the origin stays,
// and the record lives at least a ttl past the fence it now holds.
const releaseUpdate = `UPDATE {T} SET
	fence       = {MAX}(fence + 1, {NOW} * 1000),
	token       = '',
	fingerprint = NULL,
	lease_until = {NOW},
	expires_at  = {MAX}(expires_at, {NOW} + {TTL})
WHERE key_hash = $1 AND fence = $2 AND token = $3 AND state = 1 AND expires_at > {NOW}`

// extendUpdate moves a live claim's lease (fence $2, token $4) by $3 ms, and
// its expiry with it.
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
		render:      x,
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
	// The index is created in the table's schema; its name is not qualified.
	s.recordSchema(PostgreSQL, tbl, createTable(PostgreSQL, tbl, recordColumns, ""),
		`CREATE INDEX IF NOT EXISTS `+doubleQuote(t.index())+` ON `+tbl+` (expires_at)`)
	return s
}
