// Package gateway runs the side effects of at-least-once Pub/Sub deliveries
// once.
//
// A [Gateway] guards work with records kept in a [store.Store]:
//
//   - [Gateway.Lock] de-duplicates: the work for a key runs at most once
//     while the key's record lives (the store's ttl, one hour by default).
//     A failure releases the key so that the redelivery runs it again.
//   - [Gateway.Mutex] serializes: the work for a key runs one caller at a
//     time. It does not wait: a held key answers ErrInProgress at once, and
//     every caller that retries (a nacked delivery does) runs in its turn.
//   - [Gateway.Idempotent] and [Gateway.Push] put Lock in front of an HTTP
//     handler of Pub/Sub push deliveries and answer with the status that
//     makes Pub/Sub acknowledge or redeliver. [Gateway.Route] gives a route
//     its own key function over the same Gateway.
//
// Every delivery surface (HTTP here, CloudEvents in package cloudevent, pull
// subscribers in package pull) runs the same guard: it refuses a delivery
// without a key (or runs it unguarded if the route allows), runs the work
// under Lock, recovers a panic, writes one log line and counts one
// [Outcome]. Each surface then answers the outcome from a table of its own:
// an HTTP status, a CloudEvents result, an ack or a nack.
//
// A claim has a lease: if its holder crashes, the key frees when the lease
// ends, and the next delivery takes it over with a higher fence. When the
// store implements [store.Extender] the gateway renews the lease while the
// work runs, so the lease can be short (a minute) and still cover long work;
// if the claim is lost the work's context is cancelled with [ErrLeaseLost].
//
// Renewal keeps "a body never runs twice at once for one key" (SPEC
// section 10, invariant 2) by never believing its lease lasts longer than
// the store does. The store starts a lease when it applies a Claim or an
// Extend, at some instant between the call's sending and its answer; the
// gateway counts every lease, and its first renewal, from the sending, so
// that a late answer shortens the gateway's view of the lease and never
// lengthens it. When Extends keep failing, the body is cancelled a sixth
// of a lease before that end. An Extend answering store.ErrFenced (a
// takeover, an operator's Forget) is not an outage: the body is cancelled
// at once.
//
//	st, _ := memstore.New(nil) // redisstore, sqlstore, datastorestore…
//	g, _ := gateway.New(st, nil)
//	err := g.Lock(ctx, "payment-42", func(ctx context.Context) error {
//		return charge(ctx)
//	})
//	// nil: done; ErrDuplicate: done earlier (ack); ErrInProgress: retry later.
//
// Once the work has succeeded, the gateway never reports failure: if
// recording the success fails, it logs at ERROR and returns nil, because a
// retry would repeat a side effect that already happened. The one window no
// lock can close, a crash between the side effect and the record, is closed
// at the sink: send the key along (e.g. an Idempotency-Key header) so that
// the sink ignores a repeat. See docs/design.md for the state machine and
// the sizing rules.
package gateway
