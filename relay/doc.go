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
// acknowledged (see [Source.Take]). Topic IDs resolve in the client's
// project: "t" and "projects/P/topics/t" are one topic, published through
// one publisher.
//
// # Waiting for every answer
//
// A relay gives a message back to its source only when Pub/Sub's answer
// proves it was not published; it never stops waiting for an answer while
// the message is held. The client ends each publish at its
// PublishSettings.Timeout, which the relay sets to three quarters of
// Options.Lease, from the moment a worker of the client takes the request
// up; the relay sends a round's messages of one ordering key in one
// request and all of a round's requests at once, with enough workers
// (PublishSettings.NumGoroutines) for every request it can have in
// flight, so every answer comes before the lease lapses (a round whose
// Take took more than an eighth of the lease is given back untried rather
// than published late).
// Two publishes of one message by live relays therefore both land only
// when
//
//   - a publish whose outcome the client could not learn (it timed out, or
//     the connection broke) did land: the relay leaves such a message held
//     until its lease lapses, and it is then published again; or
//   - the client's own retries of one publish landed twice (it retries
//     Unavailable and the like within its Timeout, with or without a
//     relay); or
//   - a relay outlived its lease (a process frozen past it): it logs
//     "publishing outlived the lease" and counts
//     idemgate.relay.failures{operation="lease"}.
//
// Each is a duplicate with the same child key, which the next stage runs
// once.
//
// # Rounds
//
// A relay works in rounds: Take, publish, Settle. A round waits for its
// answers at most min(1s, Lease/16); the publishes still unanswered then
// (a key whose publish the client keeps retrying, a slow request) wait on
// their own, held, and settle when their answers come, while the relay
// goes on with the next round: their keys' later messages stay behind
// them, and every other key and every unordered message flows at full
// rate. A full round of unordered messages starts the next Take as soon
// as its publishes are sent, so that taking overlaps publishing and
// settling. A round pauses the relay (PollInterval) only when none of its
// messages went through: a failure of a few keys or messages backs off
// only those.
//
// What a relay makes of each answer:
//
//	answer                                          the message
//	acknowledged                                    sent (Settle deletes it)
//	gRPC InvalidArgument, NotFound, PermissionDenied,
//	  Unauthenticated, FailedPrecondition,
//	  ResourceExhausted, OutOfRange, Unimplemented  refused: a Failure with Reason, backoff or dead
//	pubsub.ErrOversizedMessage, a message the
//	  client cannot encode (invalid UTF-8)          refused on every try: dead at once
//	pubsub.ErrPublishingPaused (an earlier request
//	  of its key failed; never sent)                given back untried (no Reason)
//	pubsub.ErrPublisherStopped (never sent)         given back untried
//	any other: DeadlineExceeded, Unavailable,
//	  Canceled, Aborted, Internal, Unknown, …      unknown: left out of Settle, held until
//	                                                its lease lapses; logged (WARN) and counted
//	                                                as failures{operation="publish_unknown"}
//
// Pub/Sub refuses a request whole, whichever of its messages it refuses
// (one that breaks the topic's schema): a refused message that shared its
// request is published again at once, alone, and only a refusal of a
// message sent alone counts. Of a key's refused request, the first message
// goes alone and the later ones are given back untried, behind it.
//
// # Backoff and dead messages
//
// A refused message waits before it is taken again (outbox.Failure.After):
// Options.MinBackoff after its first failure, doubling up to MaxBackoff,
// each wait drawn between half of it and all of it. The failure that
// reaches Options.MaxAttempts gives it up (outbox.Failure.Dead): the relay logs
// an ERROR ("a message is given up") with its topic, child key, attempts
// and reason, never its ordering key, and counts idemgate.relay.dead. The
// message stays in the outbox, listed and revived through [DeadLetters]
// (idemgate relay -dead, -revive). The later messages of its ordering key
// wait behind it, as Pub/Sub stops a key whose publish failed, unless
// Options.ReleaseDead.
//
// # Stopping
//
// Run returns within Options.StopTimeout plus its last Settles (each at
// most 10s: the round's, its stragglers', and the give-back of a Take
// started early) of its ctx's end, whatever Pub/Sub does: it waits
// StopTimeout for the answers in flight, settles what they tell, and
// leaves the rest held.
// Its publishers stop in the background, within the client's Timeout: a
// round's requests all started when it flushed them, none queued behind
// another of its key, so none outlives the lease.
//
// A relay wakes up when its source signals new messages ([Waker]:
// PostgreSQL's LISTEN/NOTIFY), and polls every Options.PollInterval in
// any case.
package relay
