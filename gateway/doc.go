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
// Every delivery surface (HTTP here, package cloudevent, package pull)
// runs the same guard, [Gateway.Deliver]: it refuses a delivery without a
// key, runs the work under Lock, writes one log line and counts one
// [Outcome], which the surface answers as an HTTP status, a CloudEvents
// result, an ack or a nack.
//
// A claim has a lease: if its holder crashes, the key frees when the lease
// ends, and the next delivery takes it over with a higher fence. Over a
// [store.Extender] the gateway renews the lease while the work runs, never
// believing it lasts longer than the store does, and cancels the work's
// context with [ErrLeaseLost] if the claim is lost (docs/design.md, "Lease
// renewal").
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
