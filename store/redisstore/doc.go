// Package redisstore is a [store.Store], [store.Extender] and [store.Failer]
// on Redis, Memorystore and Redis Cluster, through a go-redis
// [redis.UniversalClient]: one server, a Sentinel failover client or a
// cluster client (not a [redis.Ring]).
//
//	client := redis.NewClient(&redis.Options{Addr: "10.0.0.3:6379"})
//	st, err := redisstore.New(ctx, client, &redisstore.Options{TTL: 24 * time.Hour})
//
// # Records
//
// Each idempotency key is one Redis string at Prefix+key (or
// Prefix+"{"+key+"}" with [Options.HashTag]). Its value is
//
//	<state><fence>:<leaseUntil>:<expiresAt>:<token>
//
// where state is C (claimed), D (done) or, only in the layout with failures
// below, F (failed), fence is the decimal fencing token,
// leaseUntil and expiresAt are decimal Unix milliseconds on the server's
// clock, and token is the claim token of the Claim that won, verbatim to the
// end of the value (empty once the record is done or released; "free:…",
// the call's own mark, once Forget or Retry freed it). For example
//
//	C1796000340000000:1796000400000:1796004000000:2PEXRHDEZ7H2NQQKBXYRNB3GLM
//	D1796000340000000:1796000400000:1796003612345:
//
// A new record's fence is the server's clock in microseconds (TIME in
// milliseconds × 1000), and every raise sets max(fence + 1, now in µs), so
// a record made anew after Redis deleted its predecessor starts above every
// fence the predecessor handed out (see docs/stores/redis.md).
//
// A record that keeps a payload fingerprint (see [store.ClaimOptions])
// writes its state in lower case, c or d, and the fingerprint's length in
// decimal and its bytes, verbatim, before the token:
//
//	<c|d><fence>:<leaseUntil>:<expiresAt>:<length>:<fingerprint><token>
//
// Claim passes the fingerprint to the script as an argument, which keeps it
// binary-safe, and the script returns the kept one in its reply. Records
// written before fingerprints existed are upper case and read as keeping
// none.
//
// A record that keeps an origin (see [store.ClaimOptions]; the gateway sets
// one for every delivery) starts with O, then its state in upper case, and
// gives the lengths of the fingerprint (0 for none) and of the origin
// before their bytes:
//
//	O<C|D><fence>:<leaseUntil>:<expiresAt>:<length>:<length>:<fingerprint><origin><token>
//	OD1796000340000000:1796000412345:1796004012345:0:10:push/m-101
//
// Complete ends the lease at the completion, so a done record's leaseUntil
// is its completion instant (store.Record.CompletedAt). Records written
// before origins existed read as keeping none; an earlier version of this
// package refuses an O record as not a record (its Claim fails, so the
// delivery is retried, never acknowledged), so a rolling upgrade from it
// sees such errors from the old instances until the last one is replaced.
//
// A record that keeps failures (see [store.Failer]: the count of failed
// attempts, the last one's reason and the first one's instant) starts with
// A, then its state, C, D or F, and gives the lengths of the fingerprint
// and the origin (0 for none), the count, the first failure in Unix
// milliseconds on the server's clock and the reason's length before the
// bytes of all three:
//
//	A<C|D|F><fence>:<leaseUntil>:<expiresAt>:<length>:<length>:<attempts>:<firstFailure>:<length>:<fingerprint><origin><reason><token>
//	AF1796000340000000:1796000412345:1796004012345:0:10:3:1796000100000:7:push/m-101timeout
//
// A failed record exists in this layout only, since it has failed at least
// once. It keeps the fence, the fingerprint and the origin of the claim
// that failed it, but no token (its fence names that claim, as a done
// record's does), and its leaseUntil is the instant it failed
// (store.Record.FailedAt). Release, Extend, Complete and a Claim that
// takes a released or lapsed record over keep the failures, and each Fail
// adds one, so the counts of successive holders add up; Retry, Forget and
// a Claim of an
// absent or expired record write a record without them, in the layouts
// above. A record that never failed is never written as A, so Claim and
// Complete read and write exactly what they did before failures existed.
// Records written before failures existed read as keeping none; an
// earlier version of this package refuses an A record as not a record, as
// it refuses an O one from a version before its own, so a rolling upgrade
// sees such errors (and retried deliveries) from the old instances on the
// keys that failed until the last one is replaced.
//
// This layout is stable: a later version that changes it will use a
// different leading letter, and the scripts refuse a value they do not
// recognise instead of guessing. One string was chosen over a hash because
// each script then reads the record with one GET and writes it, with its
// expiry, with one SET … PXAT, and because a done record is small (about
// 46 bytes): MEMORY USAGE reports about 170 bytes for a done record under a
// 50-byte key. A 32-byte fingerprint adds 32 bytes to that; an origin its
// own length and 6 to 8 bytes more (O, its length, and the fingerprint's
// length when there is none); failures their reason's length and 19 to 25
// bytes more (the lengths, the count and the first failure's instant).
//
// Redis deletes a record by itself at expiresAt plus [Options.Grace]
// (PEXPIREAT); nothing sweeps.
//
// # Clock
//
// Every instant comes from the server: each script asks Redis for TIME and
// the client sends only durations. Processes whose clocks disagree therefore
// agree on every lease, and no client-side clock skew can let two holders in.
// (Redis replicates a script by its effects, the only mode since Redis 7
// and the default since 5, so a replica or the AOF replays the record the
// primary wrote, not a second reading of the clock.)
//
// # Round trips
//
// Each operation is one EVALSHA of its own script (claim.lua, complete.lua,
// release.lua, extend.lua and fail.lua, and inspect.lua and forget.lua for
// the operator's [Store.Inspect], [Store.Forget] and [Store.Retry], each
// after record.lua, which reads and writes the layout), atomic on its one
// key. A fresh message costs two commands (Claim, Complete), a duplicate
// one, with or without a fingerprint, and so does a delivery of a failed
// key (Claim answers AlreadyFailed). After a restart, a failover
// or SCRIPT FLUSH the first call of each script gets NOSCRIPT and is sent
// again as EVAL, which caches it. go-redis may retry a command whose reply
// was lost; every script is safe to run twice: a retried Claim finds its own
// token and re-affirms the win, a retried Complete finds DONE with its fence,
// a retried Release finds the fence already moved, a retried Fail finds
// FAILED with its fence (or, after a failure that only counted, the fence
// moved, and answers as to a claim fenced out), a retried Forget or Retry
// finds the record freed under its own mark and reports true again.
//
// # Requirements
//
// Redis 6.2 or later (for SET … PXAT) or Valkey, self-run or on Memorystore
// (for Redis, for Redis Cluster or for Valkey), with maxmemory-policy
// noeviction: an evicted record is forgotten, so a duplicate runs again or a
// second holder gets in. [New] reads the policy of the server, or of every
// master of a cluster, and refuses any other unless [Options.AllowEviction]
// accepts the risk. It refuses a [redis.Ring] outright: a Ring hands a
// shard's keys to another shard while the first is marked down, and the
// records stay behind. docs/stores/redis.md explains these and the other
// operational rules.
package redisstore
