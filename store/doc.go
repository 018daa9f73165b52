// Package store defines the port between the idemgate gateway and the
// databases that keep its records.
//
// A [Store] keeps one record per key. A record is CLAIMED (someone is doing
// the work), DONE (the work succeeded) or, in a store that implements
// [Failer], FAILED (the work failed for good), and carries a fencing token
// ("fence", an int64 that only rises and never repeats), the token of the
// Claim call that last won it, and two instants on the store's own clock:
// leaseUntil (until when the holder owns the key) and expiresAt (until when
// the record suppresses duplicates). Whether a record is reclaimable is
// never stored: every operation computes it from the clock when it reads the
// record. Nothing sweeps in the background.
//
// # Transitions
//
// Every operation is atomic: it reads, decides and writes one record as a
// single step with respect to every other operation on that key.
//
//	from                          call      guard              to          result       fence
//	absent, or now ≥ expiresAt    Claim     —                  CLAIMED     Won          now if absent, else raised
//	CLAIMED, same claim token     Claim     —                  unchanged   Won          same
//	CLAIMED                       Claim     now < leaseUntil   unchanged   HeldByOther  same
//	CLAIMED                       Claim     now ≥ leaseUntil   CLAIMED     Won          raised
//	DONE                          Claim     now < expiresAt    unchanged   AlreadyDone  same
//	CLAIMED                       Complete  claim matches      DONE        true         same
//	DONE                          Complete  fence matches      unchanged   true         same
//	any other                     Complete  —                  unchanged   false        same
//	CLAIMED                       Release   claim matches      reclaimable —            raised
//	any other                     Release   —                  unchanged   —            same
//	CLAIMED                       Extend    claim matches      extended    Claim        same
//	any other                     Extend    —                  unchanged   ErrFenced    same
//	CLAIMED or DONE, unexpired    Forget    —                  reclaimable true         raised
//	absent, or now ≥ expiresAt    Forget    —                  unchanged   false        same
//
// A store that implements [Failer] adds a state and two calls:
//
//	from                          call      guard              to          result       fence
//	FAILED                        Claim     now < expiresAt    unchanged   AlreadyFailed same
//	CLAIMED                       Fail      claim matches,     FAILED      n, true      same
//	                                        final or n = max
//	CLAIMED                       Fail      claim matches      reclaimable n, false     raised
//	FAILED                        Fail      fence matches      unchanged   n, true      same
//	any other                     Fail      —                  unchanged   0, false     same
//	FAILED, unexpired             Retry     —                  reclaimable true         raised
//	any other                     Retry     —                  unchanged   false        same
//	FAILED, unexpired             Forget    —                  reclaimable true         raised
//	FAILED                        Complete, Release, Extend: as "any other" (false, unchanged, ErrFenced)
//
// n is the record's count of failed attempts after the call: one more than
// it held. A Claim that wins a released or lapsed record keeps its count,
// its reason and its first failure, so that the failures of successive
// holders add up; one that wins an absent or expired record starts at 0.
// Fail's FAILED sets leaseUntil = now (the instant it failed) and
// expiresAt = now + ttl, like Complete; its other row is a Release that
// also counts. Retry and Forget clear the count, the reason and the first
// failure.
//
// "claim matches" means the record holds the caller's fence and token;
// "now" as a fence is the store's clock in microseconds, and "raised" is
// max(fence + 1, now): see [FenceAt]. A DONE record is matched by its fence
// alone (some stores drop the token when they complete): since fences never
// repeat, the fence names the claim that completed it.
//
// On Won the store sets leaseUntil = now + lease and expiresAt = leaseUntil +
// ttl. Complete sets expiresAt = now + ttl. Release sets leaseUntil = now, so
// the next Claim wins at once. Extend sets leaseUntil = now + lease and moves
// expiresAt to at least leaseUntil + ttl. The ttl is a setting of the store
// (one hour by default in every store of this module); the lease is chosen
// per call. Forget, the operator's action of the optional [Inspector], is a
// Release that asks for no fence and frees a DONE record too: the state
// becomes CLAIMED, the token empties and leaseUntil = now. Release and
// Forget also move expiresAt to at least now + ttl, so that a record lives a
// ttl past every fence it holds. A Claim whose lease is not shorter than the
// ttl is refused ([ErrLeaseTooLong]).
//
// # Fencing
//
// The fence and the token are the proof of ownership. Complete, Release and
// Extend succeed only when the caller's fence equals the record's, and, on a
// CLAIMED record, its token too. Because the fence
// rises on every reclaim and on every Release, a holder that stalled past its
// lease (a "zombie") cannot write once someone else has taken the key over,
// and a claim that was given up cannot be completed later.
//
// Complete does not look at the lease. Until somebody reclaims the key, the
// late holder is the only one that ran the work; refusing its DONE would leave
// the key claimable after the side effect happened, and the next delivery
// would repeat it. The clock decides who may take a key over; the fence
// decides who may write.
//
// Only a won claim proves ownership. Complete, Release and Extend (and the
// CompleteTx methods of the stores that have one) refuse a claim whose
// Status is not Won with an error wrapping [ErrNotWon], and touch nothing:
// an AlreadyDone or HeldByOther claim carries the record's fence, which is
// another holder's, or was.
//
// Release bumps the fence because a released claim is abandoned: if it kept
// its fence, a holder that released and then (by a bug or a retry) completed
// would mark DONE work that nobody finished.
//
// # Lifetime
//
// A store may physically delete a record only after expiresAt (Redis
// PEXPIREAT, a TTL policy, a purge job). The next Claim then makes a new
// record, whose fence is the store's clock in microseconds. Every fence the
// deleted record handed out was raised at least a ttl before its expiresAt,
// so the new record starts above all of them: its fences never repeat an
// old one, and a holder of the deleted record, however late, owns nothing.
// This holds as long as the store's clock (the server's, or for the stores
// that decide on the client, every process's) does not step back by a ttl,
// and no key takes more than about one fence raise per microsecond for a
// long stretch.
//
// # Claim tokens
//
// Each Claim call chooses a random token. A store that retries a Claim
// internally after losing the reply (a commit whose answer was dropped) must
// reuse that token: the record then shows the caller's own token and the
// retry re-affirms the claim instead of reporting HeldByOther to itself or
// bumping the fence twice. A caller may fix the token with [WithClaimToken],
// which makes its own retries of Claim just as safe.
//
// # Fingerprints
//
// A Claim may carry a fingerprint of the delivery's payload, at most
// [MaxFingerprintLen] bytes, in its context ([WithFingerprint]). The store
// keeps it on the record in the same write that wins it (Won sets it, to
// nil when the Claim carried none) and returns the kept one with every
// result: Won, AlreadyDone, HeldByOther. Extend and Complete keep it;
// Release clears it with the lease, since a released record is free. The
// store never compares fingerprints: the gateway does, to tell a redelivery
// from a different payload that reuses the key.
//
// # Origins
//
// A Claim may also name the delivery that makes it, at most [MaxOriginLen]
// bytes of printable UTF-8 ([CheckOrigin]), in its context ([WithOrigin]);
// the gateway sets the surface and the message id, such as "push/4711". The
// store keeps it like a fingerprint (Won sets it, to none when the Claim
// carried none; Extend and Complete keep it; AlreadyDone and HeldByOther
// return the winner's), except that Release and Forget keep it too: a
// released record names its last holder. So a DONE record answers which
// delivery did the work, and, with its lease end, which Complete sets to
// the completion instant, when ([Record.CompletedAt]).
//
// # Keys
//
// Keys are opaque non-empty UTF-8 strings without NUL bytes, at most
// [MaxKeyLen] bytes; [CheckKey] enforces that and stores return its error
// unchanged. Distinct keys are distinct records: a store that shortens long
// keys must do so with a collision-resistant hash.
package store
