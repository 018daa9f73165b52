// Package firestorestore keeps idemgate records in Cloud Firestore (native
// mode) through cloud.google.com/go/firestore.
//
//	client, err := firestore.NewClient(ctx, "my-project") // or NewClientWithDatabase
//	...
//	st, err := firestorestore.New(client, &firestorestore.Options{Collection: "idemgate_records"})
//
// Each key is one document in [Options.Collection], whose ID is the key,
// or "sha256:" and its hex digest when Firestore would not take the key as
// an ID (the key is then kept in the document and checked on every read).
// Every write is conditioned on the document's update time as read, so a
// duplicate costs one read, and a holder's Complete, Release or Extend of
// a claim this store wrote is one conditioned write. Contention and
// transient failures are retried with jittered backoff, a Claim keeping
// its token so that a write whose reply was lost is recognised as its own
// win.
//
// Leases and expiry are stamped with the client's clock ([Options.Now]):
// the processes that share a collection must keep their clocks within
// [Options.SkewMargin] of each other. [Store.CompleteTx] completes a claim
// inside the caller's transaction, before its first write, and
// [Store.Outbox] publishes the messages it queued. Nothing is deleted by
// this package: configure a TTL policy on the expiresAt field.
//
// docs/stores/firestore.md gives the stored fields, the round trips, the
// indexes, the TTL policy and the IAM role.
package firestorestore
