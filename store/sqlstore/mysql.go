package sqlstore

import "strconv"

// mysqlNow is the MySQL/MariaDB clock in epoch milliseconds, read when
// evaluated (see the {NOW} note in postgres.go: decisions are taken after
// row-lock waits). MySQL offers the current time only as SYSDATE(), in the
// session's time zone; UTC_TIMESTAMP() and NOW() are fixed at the start of
// the statement. Converting SYSDATE() with UNIX_TIMESTAMP() would go through
// the time zone, whose daylight-saving overlap makes an hour of local times
// ambiguous each year. So the clock is the statement's start in UTC, plain
// arithmetic from the epoch, plus the time elapsed since, measured as the
// difference of two local times a few milliseconds apart.
const mysqlNow = `((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6))) DIV 1000)`

// In ON DUPLICATE KEY UPDATE, MySQL assigns columns from left to right and
// each expression sees the columns already assigned, so a condition on the
// old row cannot simply be repeated in every assignment: after the first
// one it would read half-updated values. The decision is therefore taken
// once, in the first assignment, kept in the session variable
// @idemgate_won, and reused by the others. The same left-to-right rule is
// put to use for expires_at, here and in VALUES: it reads the lease_until
// just written, so both come from one reading of the clock. (MySQL 8 warns
// that assigning user variables inside expressions is deprecated; it has no
// replacement for this, and MariaDB does not deprecate it.)
//
// The takeover test reads the clock twice and the new lease once more, all
// under the row lock, so the statement still decides as on one reading: a
// refusal as on the first (the record was alive and held then), a takeover
// as on the last (a lapsed lease stays lapsed). TestClaimDecidesOnce checks
// it on a clock that steps on every reading.
//
// The failures (attempts, reason, first_failure) are assigned after the
// verdict and before expires_at changes: a claim that wins an expired
// record clears them, whether it expired at the verdict's reading or at
// the later one that mysqlFresh takes (a takeover then is that of the
// later reading); every other claim keeps them.

// mysqlFresh keeps in @idemgate_fresh whether the claim starts the
// record afresh: it won, and the record it won had expired.
const mysqlFresh = `(@idemgate_fresh := @idemgate_won AND expires_at <= {NOW})`

// mysqlClaimWins is {WIN}: the caller ($3) takes over the existing record,
// whose columns the bare names denote.
const mysqlClaimWins = `(expires_at <= {NOW} OR (state = 1 AND lease_until <= {NOW} AND token <> $3))`

// mariadbClaim is the whole Claim on MariaDB: the upsert of claimUpsert,
// with RETURNING (MariaDB 10.5) reporting the row as it stands afterwards,
// whether inserted, taken over or left alone.
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

// mysqlClaim is the same upsert for MySQL, which has no RETURNING. Every
// value the caller needs is also copied into a session variable, both in
// VALUES (the insert) and in the assignments (the update, which runs after
// VALUES and overwrites them), and mysqlClaimRead reads them back on the
// same connection. The answer is therefore exactly what this statement
// wrote, with no second look at the table, no transaction and no lock held
// across the round trip: two statements, the fewest MySQL allows.
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

// mysqlClaimRead reads mysqlClaim's answer back, as claimResult
// (postgres.go) answers. The failures are read only when the state is 3:
// the insert, which leaves their variables as an earlier statement set
// them, never makes a FAILED record, and the update sets them.
const mysqlClaimRead = `SELECT @idemgate_fence,
	IF(@idemgate_state <> 1, 0, IF(@idemgate_token = $1, @idemgate_lease, -@idemgate_lease)), @idemgate_fp, @idemgate_origin,
	IF(@idemgate_state = 3, @idemgate_attempts, NULL), IF(@idemgate_state = 3, @idemgate_reason, NULL)`

// mysqlClaimResult is claimResult (postgres.go) in MySQL's words.
const mysqlClaimResult = `fence, IF(state <> 1, 0, IF(token = $3, lease_until, -lease_until)), fingerprint, origin,
	IF(state = 3, attempts, NULL), reason`

// MySQL's UPDATE has no RETURNING, and whether it counts a matched row
// whose values did not change depends on the client flag CLIENT_FOUND_ROWS
// (clientFoundRows in the driver's DSN), which is the caller's choice. The
// updates below therefore answer through LAST_INSERT_ID(expr): it returns
// expr, and the server reports the value in the statement's OK packet
// (sql.Result.LastInsertId) only when a row matched; otherwise it reports 0.
// This is MySQL's documented way to read a value from an UPDATE in the same
// round trip. Assignments run left to right: Complete ends the lease now
// and computes expires_at from the new lease_until (one reading of the
// clock), both from the old state before state changes, and Extend
// computes expires_at from the new lease_until.

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

// mysqlFail is failUpdate (fail.go) in MySQL's words. Until state, the
// last assignment, every condition on state reads the old one; from the
// first assignment on, attempts is the new count and, from the third,
// lease_until the one reading of the clock that the failure's instants
// and the raised fence count from. The answer comes back as
// LAST_INSERT_ID(2 * attempts + failed): never 0 for a row that matched,
// whose count is at least 1. {FAILED} is the verdict: the record was
// FAILED already, or this failure makes it so.
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
		// The record is keyed on SHA-256 of the key: InnoDB limits an index
		// entry to 3072 bytes, and MySQL's default collations compare
		// case- and accent-insensitively, so neither the key itself nor a
		// prefix of it could be the primary key. key_text keeps the key for
		// people reading the table; utf8mb4_bin compares it byte for byte.
		s.create = []string{`CREATE TABLE IF NOT EXISTS ` + tbl + ` (
	key_hash    BINARY(32) NOT NULL,
	key_text    MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
	state       TINYINT    NOT NULL,
	fence       BIGINT     NOT NULL,
	token       BLOB       NOT NULL,
	lease_until BIGINT     NOT NULL,
	expires_at  BIGINT     NOT NULL,
	fingerprint VARBINARY(32) NULL,
	origin      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
	attempts    INT        NULL,
	reason      VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
	first_failure BIGINT   NULL,
	PRIMARY KEY (key_hash),
	KEY ` + backquote(t.index()) + ` (expires_at)
) ENGINE = InnoDB`}
		s.addColumn = `ALTER TABLE ` + tbl + ` ADD COLUMN fingerprint VARBINARY(32) NULL`
		s.addOrigin = `ALTER TABLE ` + tbl + ` ADD COLUMN origin VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL`
		s.addFailures = addColumns(tbl, "INT NULL", "VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL", "BIGINT NULL")
		return s
	}
}
