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
// The fence and the token are the proof of ownership: Complete, Release
// and Extend succeed only when the caller's fence equals the record's and,
// on a CLAIMED record, its token too. The fence rises on every takeover and
// Release, so a holder that stalled past its lease writes nothing once the
// key was taken over, and a released claim never completes. Complete does
// not look at the lease: until a takeover the late holder is the only one
// that ran the work. Only a Won claim proves ownership; the others are
// refused with [ErrNotWon]. docs/design.md ("The record") gives the reasons.
//
// # Lifetime
//
// A store may delete a record only after expiresAt (Redis PEXPIREAT, a TTL
// policy, a purge job). A new record's fence is the store's clock in
// microseconds, above every fence of a deleted predecessor as long as that
// clock does not step back by a ttl (see [FenceAt]).
//
// # Claim's inputs
//
// [ClaimOptions] carries a Claim's payload fingerprint, origin and token.
// The store checks them ([ClaimOptions.Checked]), keeps the fingerprint and
// the origin on the record it wins and returns the kept ones with every
// result, and draws one token per call ([ClaimOptions.ClaimToken]) that its
// own retries reuse, so that a retry whose first attempt committed
// re-affirms. Release clears the fingerprint; Release and Forget keep the
// origin. The store never compares fingerprints: the gateway does.
// docs/stores/README.md ("What a store keeps") has the details.
//
// # Keys
//
// Keys are opaque non-empty UTF-8 strings without NUL bytes, at most
// [MaxKeyLen] bytes; [CheckKey] enforces that and stores return its error
// unchanged. Distinct keys are distinct records: a store that shortens long
// keys must do so with a collision-resistant hash.
package store
