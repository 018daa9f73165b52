// Package datastorestore keeps idemgate records in Firestore in Datastore
// mode (and the legacy Cloud Datastore) through
// cloud.google.com/go/datastore.
//
//	client, err := datastore.NewClient(ctx, "my-project") // or NewClientWithDatabase
//	...
//	st, err := datastorestore.New(client, &datastorestore.Options{Namespace: "payments"})
//
// Each key is one unindexed entity of kind [Options.Kind] in
// [Options.Namespace], named by the key, or by "sha256:" and its hex
// digest when Datastore would not take the key as a name (the key is then
// kept in the entity and checked on every read). A duplicate costs one
// lookup; a fresh message (Claim, Complete) four round trips. Contention
// and transient failures are retried with jittered backoff, a Claim
// keeping its token so that a commit whose reply was lost is recognised
// as its own win.
//
// Leases and expiry are stamped with the client's clock ([Options.Now]):
// the processes that share a store must keep their clocks within
// [Options.SkewMargin] of each other. [Store.CompleteTx] completes a claim
// inside the caller's transaction, and [Store.Outbox] publishes the
// messages it queued. Nothing is deleted by this package: configure a TTL
// policy on the expiresAt property.
//
// docs/stores/datastore.md gives the stored properties, the round trips,
// the indexes the outbox needs, the TTL policy and the IAM role.
package datastorestore
