// Package cloudevent runs the side effects of CloudEvents functions once:
// Cloud Functions gen2 (Cloud Run functions) and any Eventarc destination
// served by functions-framework-go or the CloudEvents SDK.
//
// [Wrap] puts [gateway.Gateway.Lock] in front of a CloudEvent function and
// returns a function of the same signature, ready for functions.CloudEvent:
//
//	func init() {
//		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
//		st, err := redisstore.New(context.Background(), rdb, nil) // any shared store.Store
//		if err != nil {
//			log.Fatal(err)
//		}
//		g, err := gateway.New(st, nil)
//		if err != nil {
//			log.Fatal(err)
//		}
//		functions.CloudEvent("OnOrder", cloudevent.Wrap(g, onOrder, nil))
//	}
//
//	func onOrder(ctx context.Context, e event.Event) error {
//		m, _ := pushenvelope.FromContext(ctx) // the Pub/Sub message
//		return ship(ctx, m.Attributes["order_id"], m.Data)
//	}
//
// Keys come from a [gateway.KeyFunc], the one key function type of push,
// CloudEvents and pull, applied to the event's message (see
// [Options].Route). The default, [KeyFromEvent], keys a Pub/Sub event on
// its messageId, as the HTTP middleware keys the same message, and any
// other event on its source and id.
//
// fn's result is the answer: nil acks, an error nacks. When Wrap decides
// instead (a duplicate, a live holder, no key, a conflict, a FAILED key),
// it returns nil or an error that carries a *cehttp.Result (package
// github.com/cloudevents/sdk-go/v2/protocol/http) for the status and
// matches the gateway's sentinel (errors.Is). docs/cloudfunctions.md,
// "What the function answers", gives every answer, and how to deploy with
// retries and dead-lettering: without retries on the trigger, every nack
// drops the event.
package cloudevent
