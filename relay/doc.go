// Package relay publishes the messages of a transactional outbox to
// Pub/Sub.
//
// A guarded body enqueues messages with its store's CompleteTx (see
// package outbox); they commit with the body's transaction. A [Relay]
// takes committed messages from a [Source] (the store), publishes them
// with cloud.google.com/go/pubsub/v2, each carrying its child key, and
// marks them sent, which deletes them:
//
//	src := st.Outbox() // a *sqlstore.Store
//	r, err := relay.New(src, client, nil)
//	if err != nil { … }
//	err = r.Run(ctx) // until ctx ends
//
// Delivery is at least once: a relay that dies between a publish and its
// mark leaves the message to be taken again once its lease lapses, and it
// is published a second time with the same child key, which a downstream
// route keyed with gateway.KeyFromChildKey runs once. Several relays may
// run at once on one outbox: each message is held by one of them at a
// time. Messages with an ordering key are published in the order they
// were enqueued, each only once the ones before it on its key were
// acknowledged (see [Source.Take]).
//
// A relay wakes up when its source signals new messages ([Waker]:
// PostgreSQL's LISTEN/NOTIFY), and polls every Options.PollInterval in
// any case.
package relay
