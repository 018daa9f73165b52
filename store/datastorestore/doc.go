// Package datastorestore keeps idemgate records in Firestore in Datastore
// mode (and the legacy Cloud Datastore) through
// cloud.google.com/go/datastore.
//
//	client, err := datastore.NewClient(ctx, "my-project") // or NewClientWithDatabase
//	...
//	st, err := datastorestore.New(client, &datastorestore.Options{Namespace: "payments"})
//
// Each key is one unindexed entity of kind [Options.Kind], named by the
// key (or "sha256:" and its digest when Datastore would not take it). A
// duplicate costs one lookup. Processes sharing a store must keep their
// clocks within [Options.SkewMargin]. [Store.CompleteTx] completes a claim
// inside the caller's transaction, and [Store.Outbox] publishes the
// messages it queued. Nothing is deleted here: configure a TTL policy on
// the expiresAt property.
//
// docs/stores/datastore.md gives the stored properties, the round trips,
// the indexes, the TTL policy and the IAM role.
package datastorestore
