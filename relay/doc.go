// Package relay publishes the messages of a transactional outbox to
// Pub/Sub.
//
// A guarded body enqueues messages with its store's CompleteTx (see
// package outbox); they commit with the body's transaction. A [Relay]
// takes committed messages from a [Source] (the store), publishes them
// with cloud.google.com/go/pubsub/v2, each carrying its child key, and
// marks them sent, which deletes them:
//
//	r, err := relay.New(st.Outbox(), client, nil) // st a *sqlstore.Store
//	if err != nil { … }
//	err = r.Run(ctx) // until ctx ends
//
// Delivery is at least once: a message whose relay died before marking it
// sent is published again, with the same child key, once its lease lapses;
// a downstream route keyed with gateway.KeyFromChildKey runs it once.
// Several relays may run on one outbox; each message is held by one at a
// time. The messages of one ordering key are published in enqueue order,
// each once the one before it was acknowledged. Topic IDs resolve in the
// client's project.
//
// A relay works in rounds: it takes a batch for Options.Lease, publishes
// each ordering key's share in one request, waits for the answers, and
// settles the batch: the acknowledged messages are deleted, the refused
// ones come back after a backoff and are given up (dead, listed through
// [DeadLetters]) after Options.MaxAttempts, and a message whose outcome is
// unknown stays held until its lease lapses, since its publish may still
// land. A relay never gives back a message Pub/Sub may still publish.
// docs/design.md ("The relay's rounds") has the rules behind each step:
// the answers and what each means, the timeouts that keep every answer
// inside the lease, stragglers, requests refused whole, and stopping.
package relay
