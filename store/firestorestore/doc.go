// Package firestorestore keeps idemgate records in Cloud Firestore (native
// mode) through cloud.google.com/go/firestore.
//
//	client, err := firestore.NewClient(ctx, "my-project") // or NewClientWithDatabase
//	...
//	st, err := firestorestore.New(client, &firestorestore.Options{Collection: "idemgate_records"})
//
// Each key is one document in [Options.Collection] whose ID is the key (or
// "sha256:" and its digest when Firestore would not take it). Every write
// is conditioned on the update time read, so a duplicate costs one read.
// Processes sharing a collection must keep their clocks within
// [Options.SkewMargin]. [Store.CompleteTx] completes a claim inside the
// caller's transaction, and [Store.Outbox] publishes the messages it
// queued. Nothing is deleted here: configure a TTL policy on the expiresAt
// field.
//
// docs/stores/firestore.md gives the stored fields, the round trips, the
// indexes, the TTL policy and the IAM role.
package firestorestore
