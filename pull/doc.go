// Package pull runs the side effects of Pub/Sub pull subscribers once.
//
// [Wrap] turns a handler of messages into the callback that
// cloud.google.com/go/pubsub/v2's Subscriber.Receive takes. Each message runs
// the handler under [gateway.Gateway.Lock], keyed by the message ID by
// default, and is acknowledged according to the outcome: success and
// duplicates are acked, everything else (a failure, a panic, a key held by
// another delivery, a store outage, a missing key) is nacked so that Pub/Sub
// delivers it again, or eventually to the subscription's dead-letter topic.
//
//	st, _ := redisstore.New(ctx, rdb, nil) // shared by every instance
//	g, _ := gateway.New(st, nil)
//	sub := client.Subscriber("orders-sub")
//	err := sub.Receive(ctx, pull.Wrap(g, func(ctx context.Context, m *pubsub.Message) error {
//		return ship(ctx, m.Data) // runs once per message ID
//	}, &pull.Options{Subscription: sub.String()}))
//
// The handler must not Ack or Nack the message; the callback does, after the
// outcome is recorded in the store. Keys come from a [gateway.KeyFunc], the
// one key function type of push, CloudEvents and pull: it sees the pulled
// message as a *pushenvelope.Message, so gateway.KeyFromAttribute keys on a
// business attribute here exactly as it does over push, and push and pull
// consumers sharing a store agree.
//
// Pull subscriptions can enable exactly-once delivery. The callback then
// waits (up to [Options].AckTimeout) for Pub/Sub to confirm each ack and
// logs a failure and what the redelivery it causes will meet: a duplicate
// when the key is done, the work again after an unguarded run or a failed
// Complete. See docs/pull.md for the ack and nack mapping, flow control,
// and how the client's ack deadline extension relates to the gateway's
// lease.
package pull
