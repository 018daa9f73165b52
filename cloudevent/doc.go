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
// [Options].Key). The default, [KeyFromEvent], is the messageId of a
// google.cloud.pubsub.topic.v1.messagePublished event (which is also its
// event id), the key the HTTP middleware computes for the same message, so
// a function and a push endpoint sharing a store dedupe each other. Any
// other event is keyed on its source and id together, which the
// CloudEvents spec makes unique (the id alone is unique per source only):
// the source's length, a colon, the source, a colon and the id, e.g.
// "45://storage.googleapis.com/projects/_/buckets/b:1042".
// gateway.KeyFromAttribute keys on a Pub/Sub attribute.
//
// Upgrading from a version that keyed every event on its id alone: the
// records it wrote for events other than Pub/Sub ones are not found under
// the new keys, so such an event handled before the upgrade and delivered
// again after it, within the store's ttl (a retry in flight, a late
// redelivery), runs once more. Pub/Sub events keep their keys. Where that
// is not acceptable, keep the old keys with Options.Route.Key set to
// gateway.KeyFromMessageID (and two sources' events with one id stay one).
//
// # What the caller sees
//
// functions-framework-go turns the returned error into the HTTP status that
// Eventarc's push subscription sees:
//
//	fn returned nil                       200   ack; the key is done
//	the key is already done               200   ack; fn did not run
//	a live holder owns the key            503   nack; retried later (if retries are on)
//	fn returned an error                  500   nack; the claim is released
//	fn's transaction was fenced out
//	(an error matching store.ErrFenced)   200   ack when the key is done: nothing was written;
//	                                      503 while another claim holds it; 500 otherwise
//	fn panicked                           500   nack; the claim is released
//	the store failed                      503   nack; fn did not run
//	no key (e.g. a missing attribute)     500   nack, unless AllowUnguarded
//	the key was used for another payload
//	(with Options.Fingerprint)            409   nack, or 200 (ack) with AcceptConflicts
//	messagePublished data that is not
//	a Pub/Sub message                     400   nack; fn did not run
//	the work failed for good, now or
//	before (gateway.Options.MaxAttempts)  422   nack (persistent on Eventarc Advanced),
//	                                            or 200 (ack) with AckFailed
//
// On an Eventarc Advanced pipeline (Options.Platform EventarcAdvanced) a
// conflict and a missing key answer 422 instead: the pipeline retries 409
// and 500 up to its attempt limit, but ends the delivery at once on 422, a
// persistent error, as on 400. A status of fn's own that the pipeline does
// not retry ends the delivery there too, so its failure is final: the key
// goes FAILED (on a store that keeps failures), where idemgate failed
// lists it. docs/design.md holds the answers of every surface and what each
// platform then does.
//
// An event without an id never reaches the function: the SDK answers 400.
// When Wrap, not fn, decides the answer (503, the 500 for no key, 400), it
// returns an error that carries a *cehttp.Result (package
// github.com/cloudevents/sdk-go/v2/protocol/http) for the SDK and that
// matches [gateway.ErrInProgress], [gateway.ErrStore], [gateway.ErrNoKey] or
// [pushenvelope.ErrNotPush] with errors.Is. With the gateway's
// Options.HideKeys set, nothing in that error holds the raw key: an
// *gateway.InProgressError carries the key's digest (the one the logs show)
// as its Key, and other causes keep their text, with the key replaced by
// the digest, and their errors.Is matches, but no longer their types.
// fn's own errors come back unchanged.
//
// Without retries enabled on the trigger (gcloud functions deploy --retry),
// every nack drops the event: see docs/cloudfunctions.md for deployment,
// retries and dead-lettering.
package cloudevent
