// Package firestorestore keeps idemgate records in Cloud Firestore (native
// mode) through cloud.google.com/go/firestore.
//
//	client, err := firestore.NewClient(ctx, "my-project") // or NewClientWithDatabase
//	...
//	st, err := firestorestore.New(client, &firestorestore.Options{Collection: "idemgate_records"})
//
// # Layout
//
// Each key is one document in [Options.Collection] (default
// "idemgate_records"), in the database the client was created for. The
// document ID is the key itself when Firestore accepts it as an ID (at most
// 1500 bytes, no "/", not "." or "..", not of the reserved form __…__);
// any other key, and any key that starts with "sha256:", is stored under
// "sha256:" followed by the hex SHA-256 of the key, with the key itself in
// the "key" field, which every read checks. Keys with slashes, common in
// resource names, are therefore hashed. The fields are
//
//	state        string     "CLAIMED", "DONE" or "FAILED"
//	fence        integer    the fencing token, 1 for a new record
//	token        string     the token of the Claim call that won ("" once released)
//	leaseUntil   timestamp  until when the holder owns the key; on a DONE record, when it was completed,
//	                        on a FAILED one, when it failed
//	expiresAt    timestamp  until when the record suppresses duplicates
//	key          string     the original key, only on documents with a hashed ID
//	fingerprint  bytes      the payload fingerprint kept at Won (at most 32 bytes), absent for none
//	origin       string     the delivery that won the record (store.WithOrigin), absent for none
//	attempts     integer    how many attempts failed (store.Failer), absent for none
//	reason       string     why the last failed attempt failed, absent for none or for an empty reason
//	firstFailure timestamp  when the first counted attempt failed, absent for none
//
// A document written before the store kept fingerprints, origins or
// failures has no such field and reads as keeping none. The failures
// (attempts, reason, firstFailure) are written by Fail, carried across
// releases and takeovers, and deleted by Retry and Forget, so a record
// whose work never failed has none of them.
//
// # Operations
//
// Every operation reads the document and, when it has something to write,
// writes it with a precondition: Create (the document must not exist) for a
// new record, else an update that requires the document's update time to
// be the one just read. The write therefore lands only on the state the
// decision was made on; when somebody else wrote first, the precondition
// fails and the operation starts over on a fresh read. That is Firestore's
// optimistic form of a single-document transaction, and it needs no
// BeginTransaction or Rollback round trip.
//
// The store also remembers, per key, the live claim it last wrote (the
// record and its update time; a few thousand keys at most): what a won
// Claim or an Extend left. The holder's next write of that key (Complete,
// Release, Extend, Fail) decides on the remembered version and writes on the
// condition that the update time is still the remembered one, without
// reading first: Firestore raises a document's update time on every
// change, so the condition holds exactly when the document is still what
// the store decided on. Complete after a winning Claim is thus one commit.
// A Claim always reads first, and nothing read is remembered: a Claim may
// be a duplicate of a message another process completed since this store
// last saw the key, and a duplicate must be one read that writes nothing.
// A fresh message (Claim, Complete) costs three round trips (read, commit,
// commit) and a duplicate one (read). Conflicts and transient failures are
// retried a few times with jittered backoff; the operation is then
// returned as an error that wraps the last failure.
//
// A Claim keeps its token (see [store.ClaimToken]) across those retries, so
// a write whose reply was lost, or that the transport sent twice, is
// re-affirmed by the retry (it finds its own token) rather than reported as
// HeldByOther or bumped a second time.
//
// # Clock
//
// Leases and expiry are computed on the client's clock ([Options.Now]), as
// in the datastorestore package: the processes that share a collection
// must keep their clocks within [Options.SkewMargin] of each other.
//
// # Completing inside your transaction
//
// When the side effect is a write to the same database as the records,
// [Store.CompleteTx] records the claim done inside the caller's own
// transaction (RunTransaction), checking its fence there: the business
// documents and the completion commit together or not at all, and a holder
// that stalled past its lease and was taken over fails the check, so its
// transaction rolls back instead of repeating the side effect. CompleteTx
// reads, so it comes before the transaction's first write. See
// docs/stores/firestore.md.
//
// # Lifetime
//
// Nothing is deleted by this package: configure a TTL policy on the
// expiresAt field of the collection group, and Firestore removes each
// document some time after it expired. See docs/stores/firestore.md.
package firestorestore
