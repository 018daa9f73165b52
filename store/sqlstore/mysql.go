package sqlstore

import "strconv"

// mysqlNow is the MySQL/MariaDB clock in epoch milliseconds, read when
// evaluated: the statement's start in UTC plus the time elapsed since, as
// SYSDATE() alone is local time (docs/stores/sql.md, "One reading, taken
// after the row lock").
const mysqlNow = `((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6))) DIV 1000)`

// MySQL assigns columns left to right, each expression seeing those already
// assigned: a Claim decides once, in its first assignment, into @idemgate_won,
// and expires_at reads the lease_until just written (docs/stores/sql.md,
// "Deciding once" and "What a Claim keeps of a record's failures").

// mysqlFresh keeps in @idemgate_fresh whether the claim starts the
// record afresh: it won, and the record it won had expired.
const mysqlFresh = `(@idemgate_fresh := @idemgate_won AND expires_at <= {NOW})`

// mysqlClaimWins is {WIN}: the caller ($3) takes over the existing record,
// whose columns the bare names denote.
const mysqlClaimWins = `(expires_at <= {NOW} OR (state = 1 AND lease_until <= {NOW} AND token <> $3))`

// mariadbClaim is the whole Claim on MariaDB: claimUpsert's upsert, whose
// RETURNING (MariaDB 10.5) reports the row inserted, taken over or left alone.
const mariadbClaim = `INSERT INTO {T} (key_hash, key_text, state, fence, token, lease_until, expires_at, fingerprint, origin)
VALUES ($1, $2, 1, {NOW} * 1000, $3, {NOW} + $4, lease_until + {TTL}, $5, $6)
ON DUPLICATE KEY UPDATE
	fence       = IF(@idemgate_won := {WIN}, GREATEST(fence + 1, {NOW} * 1000), fence),
	attempts    = IF(` + mysqlFresh + `, NULL, attempts),
	reason      = IF(@idemgate_fresh, NULL, reason),
	first_failure = IF(@idemgate_fresh, NULL, first_failure),
	state       = IF(@idemgate_won, 1, state),
	token       = IF(@idemgate_won, $3, token),
	lease_until = IF(@idemgate_won, {NOW} + $4, lease_until),
	expires_at  = IF(@idemgate_won, lease_until + {TTL}, expires_at),
	fingerprint = IF(@idemgate_won, $5, fingerprint),
	origin      = IF(@idemgate_won, $6, origin)
RETURNING ` + mysqlClaimResult

// mysqlClaim is the same upsert for MySQL, which has no RETURNING: it copies
// every value the caller needs into session variables, in VALUES and in the
// assignments, for mysqlClaimRead to read back on the same connection. The
// answer is what this statement wrote, with no transaction and no lock held
// across the round trip.
const mysqlClaim = `INSERT INTO {T} (key_hash, key_text, state, fence, token, lease_until, expires_at, fingerprint, origin)
VALUES ($1, $2, @idemgate_state := 1, @idemgate_fence := {NOW} * 1000, @idemgate_token := $3,
	@idemgate_lease := {NOW} + $4, lease_until + {TTL}, @idemgate_fp := $5, @idemgate_origin := $6)
ON DUPLICATE KEY UPDATE
	fence       = (@idemgate_fence := IF(@idemgate_won := {WIN}, GREATEST(fence + 1, {NOW} * 1000), fence)),
	attempts    = (@idemgate_attempts := IF(` + mysqlFresh + `, NULL, attempts)),
	reason      = (@idemgate_reason := IF(@idemgate_fresh, NULL, reason)),
	first_failure = IF(@idemgate_fresh, NULL, first_failure),
	state       = (@idemgate_state := IF(@idemgate_won, 1, state)),
	token       = (@idemgate_token := IF(@idemgate_won, $3, token)),
	lease_until = (@idemgate_lease := IF(@idemgate_won, {NOW} + $4, lease_until)),
	expires_at  = IF(@idemgate_won, lease_until + {TTL}, expires_at),
	fingerprint = (@idemgate_fp := IF(@idemgate_won, $5, fingerprint)),
	origin      = (@idemgate_origin := IF(@idemgate_won, $6, origin))`

// mysqlClaimRead reads mysqlClaim's answer back, as claimResult answers.
const mysqlClaimRead = `SELECT @idemgate_fence,
	IF(@idemgate_state <> 1, 0, IF(@idemgate_token = $1, @idemgate_lease, -@idemgate_lease)), @idemgate_fp, @idemgate_origin,
	IF(@idemgate_state = 3, @idemgate_attempts, NULL), IF(@idemgate_state = 3, @idemgate_reason, NULL)`

// mysqlClaimResult is claimResult (postgres.go) in MySQL's words.
const mysqlClaimResult = `fence, IF(state <> 1, 0, IF(token = $3, lease_until, -lease_until)), fingerprint, origin,
	IF(state = 3, attempts, NULL), reason`

// MySQL's UPDATE has no RETURNING, and its affected-row count depends on the
// caller's CLIENT_FOUND_ROWS flag, so the updates below answer through
// LAST_INSERT_ID(expr), which sql.Result.LastInsertId reports when a row
// matched and 0 otherwise (docs/stores/sql.md, "Complete, Release, Extend").
const mysqlComplete = `UPDATE {T} SET
	lease_until = IF(state = 1, {NOW}, lease_until),
	expires_at  = IF(state = 1, lease_until + {TTL}, expires_at),
	state       = 2,
	fence      = LAST_INSERT_ID(fence)
WHERE key_hash = $1 AND fence = $2 AND (state = 2 OR state = 1 AND token = $3) AND expires_at > {NOW}`

// mysqlCompleteTx is completeTxUpdate (postgres.go) in MySQL's words.
const mysqlCompleteTx = `UPDATE {T} SET
	lease_until = {NOW},
	expires_at  = lease_until + {TTL},
	state       = 2,
	fence      = LAST_INSERT_ID(fence)
WHERE key_hash = $1 AND fence = $2 AND token = $3 AND state = 1 AND expires_at > {NOW}`

// mysqlFail is failUpdate in MySQL's words; assignments run left to right,
// state last, and the answer is LAST_INSERT_ID(2 * attempts + {FAILED}),
// never 0 for a row that matched (docs/stores/sql.md, "Fail, in one
// statement").
const mysqlFail = `UPDATE {T} SET
	attempts      = IF(state = 3, attempts, COALESCE(attempts, 0) + 1),
	reason        = IF(state = 3, reason, $4),
	lease_until   = IF(state = 3, lease_until, {NOW}),
	first_failure = COALESCE(first_failure, lease_until),
	expires_at    = IF(state = 3, expires_at, IF({FAILED}, lease_until + {TTL}, GREATEST(expires_at, lease_until + {TTL}))),
	fence         = IF({FAILED}, fence, GREATEST(fence + 1, lease_until * 1000)),
	token         = '',
	fingerprint   = IF({FAILED}, fingerprint, NULL),
	state         = IF(LAST_INSERT_ID(2 * attempts + {FAILED}) MOD 2 = 1, 3, 1)
WHERE key_hash = $1 AND fence = $2 AND (state = 3 OR state = 1 AND token = $3) AND expires_at > {NOW}`

// mysqlFailed is mysqlFail's {FAILED}, on the new count.
const mysqlFailed = `(state = 3 OR $5 > 0 AND attempts >= $5)`

const mysqlExtend = `UPDATE {T} SET
	lease_until = LAST_INSERT_ID({NOW} + $3),
	expires_at  = GREATEST(expires_at, lease_until + {TTL})
WHERE key_hash = $1 AND fence = $2 AND token = $4 AND state = 1 AND expires_at > {NOW}`

// mysqlStatements builds the MySQL family's statements; returning selects
// MariaDB's one-statement Claim.
func mysqlStatements(returning bool) func(t table, ttl int64) statements {
	return func(t table, ttl int64) statements {
		tbl := t.ref(backquote)
		x := func(tmpl string) query {
			return positional(expand(tmpl, "WIN", mysqlClaimWins, "T", tbl, "NOW", mysqlNow, "TTL", strconv.FormatInt(ttl, 10), "MAX", "GREATEST"))
		}
		s := statements{
			complete:    x(mysqlComplete),
			completeTx:  x(mysqlCompleteTx),
			recordState: x(recordStateSelect),
			release:     x(releaseUpdate),
			extend:      x(mysqlExtend),
			fail:        x(expand(mysqlFail, "FAILED", mysqlFailed)),
			render:      x,
			// Runs under READ COMMITTED (see Store.purgeBatch): the range
			// scan on expires_at then locks only the rows it deletes, and no
			// gap that a concurrent Claim would insert into.
			purge: x(`DELETE FROM {T} WHERE expires_at < {NOW} ORDER BY expires_at LIMIT $1`),
		}
		if returning {
			s.claim = x(mariadbClaim)
		} else {
			s.claim = x(mysqlClaim)
			s.claimRead = x(mysqlClaimRead)
		}
		// Keyed on the key's hash: InnoDB's index entries are limited and its
		// default collations case-insensitive. utf8mb4_bin compares byte for byte.
		s.recordSchema(MySQL, tbl, createTable(MySQL, tbl, recordColumns, " ENGINE = InnoDB",
			"PRIMARY KEY (key_hash)", "KEY "+backquote(t.index())+" (expires_at)"))
		return s
	}
}
