// Package datastorestore keeps idemgate records in Firestore in Datastore
// mode (and the legacy Cloud Datastore) through
// cloud.google.com/go/datastore.
//
//	client, err := datastore.NewClient(ctx, "my-project") // or NewClientWithDatabase
//	...
//	st, err := datastorestore.New(client, &datastorestore.Options{Namespace: "payments"})
//
// # Layout
//
// Each key is one entity of kind [Options.Kind] (default "IdemgateRecord")
// in [Options.Namespace], in the database the client was created for. The
// entity's name is the key itself when Datastore accepts it as a name (at
// most 1500 bytes and not of the reserved form __…__); any other key, and any
// key that starts with "sha256:", is stored under "sha256:" followed by the
// hex SHA-256 of the key, with the key itself in the "key" property, which
// every read checks. The properties are
//
//	state        string     "CLAIMED", "DONE" or "FAILED"
//	fence        int64      the fencing token, 1 for a new record
//	token        string     the token of the Claim call that won ("" once released)
//	leaseUntil   timestamp  until when the holder owns the key; on a DONE record, when it was completed,
//	                        on a FAILED one, when it failed
//	expiresAt    timestamp  until when the record suppresses duplicates
//	key          string     the original key, only on entities with a hashed name
//	fingerprint  blob       the payload fingerprint kept at Won (at most 32 bytes), absent for none
//	origin       string     the delivery that won the record (store.WithOrigin), absent for none
//	attempts     int64      how many attempts failed (store.Failer), absent for none
//	reason       string     why the last failed attempt failed, absent for none or for an empty reason
//	firstFailure timestamp  when the first counted attempt failed, absent for none
//
// None of them is indexed: the store only ever looks entities up by key, and
// a TTL policy does not need an index. Unindexed properties also keep long
// keys legal (indexed strings are limited to 1500 bytes) and spare every
// write its index updates. An entity written before the store kept
// fingerprints, origins or failures has no such property and reads as
// keeping none. The failures (attempts, reason, firstFailure) are written
// by Fail, carried across releases and takeovers, and removed by Retry
// and Forget, so a record whose work never failed has none of them.
//
// # Operations
//
// A Claim first looks the entity up outside any transaction; a lookup by
// key is strongly consistent, so a Claim that finds the key done or held
// answers from that one read and commits nothing. A Claim that wins a new
// key inserts the entity in one non-transactional commit, which fails if
// the entity appeared since the lookup; one that takes an existing record
// over rewrites it in a transaction. Complete, Release, Extend, Fail,
// Retry and Forget are each one read-modify-write transaction on the
// entity, which begins with its lookup ([datastore.BeginLater]) and
// rolls back when it writes nothing.
// A fresh message (Claim, Complete) thus costs four round trips, and a
// duplicate one. A transaction that loses a race
// ([datastore.ErrConcurrentTransaction]), an insert that finds the entity
// there, or an RPC that fails in a way that may be transient is retried a
// few times, with jittered backoff; the operation is then returned as an
// error that wraps the last failure.
//
// A Claim keeps its token (see [store.ClaimToken]) across those retries. If
// the reply to a commit was lost and the commit did land, the retry finds its
// own token in the entity and re-affirms the win with the same fence instead
// of reporting HeldByOther to itself or bumping the fence again.
//
// # Clock
//
// Datastore offers no server clock to a transaction, so leases and expiry
// are computed on the client's clock ([Options.Now]). The processes that
// share a store must keep their clocks close, which Google Cloud does for
// its VMs, Cloud Run and Cloud Functions (NTP from the metadata server). A
// lapsed lease or an expired record is only taken over once it is
// [Options.SkewMargin] overdue, so set that to the worst clock difference you
// expect between two instances; a released claim is free at once whatever
// the clocks say.
//
// # Completing inside your transaction
//
// When the side effect is a write to the same database as the records,
// [Store.CompleteTx] records the claim done inside the caller's own
// transaction (RunInTransaction), checking its fence there: the business
// entities and the completion commit together or not at all, and a holder
// that stalled past its lease and was taken over fails the check, so its
// transaction rolls back instead of repeating the side effect. See
// docs/stores/datastore.md.
//
// # Lifetime
//
// Nothing is deleted by this package: configure a TTL policy on the
// expiresAt property of the kind, and Datastore removes each entity some
// time after it expired. See docs/stores/datastore.md for the command, the
// IAM role, costs and write-rate guidance.
package datastorestore
