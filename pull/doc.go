// Package pull runs the side effects of Pub/Sub pull subscribers once.
//
// [Wrap] turns a handler of messages into the callback that
// cloud.google.com/go/pubsub/v2's Subscriber.Receive takes. Each message runs
// the handler under [gateway.Gateway.Lock], keyed by the message ID by
// default: success and duplicates are acked, everything else is nacked, so
// that Pub/Sub delivers it again, or to the dead-letter topic.
//
//	st, _ := redisstore.New(ctx, rdb, nil) // shared by every instance
//	g, _ := gateway.New(st, nil)
//	sub := client.Subscriber("orders-sub")
//	err := sub.Receive(ctx, pull.Wrap(g, func(ctx context.Context, m *pubsub.Message) error {
//		return ship(ctx, m.Data) // runs once per message ID
//	}, &pull.Options{Subscription: sub.String()}))
//
// The handler must not Ack or Nack the message; the callback does, after the
// outcome is recorded in the store. Keys come from a [gateway.KeyFunc], which
// sees the pulled message as a *pushenvelope.Message, so that push and pull
// consumers sharing a store agree on keys. On a subscription with
// exactly-once delivery the callback waits for Pub/Sub to confirm each ack
// and logs a failure. docs/pull.md has the ack and nack of each outcome,
// flow control, and how the client's ack deadline extension relates to the
// gateway's lease.
package pull
