// Package pushenvelope decodes a Google Cloud Pub/Sub push delivery into a
// [Message], whichever of its four shapes it arrived in.
//
// # Forms
//
//   - [Wrapped], the default push body: JSON {"message": {...},
//     "subscription": "projects/P/subscriptions/S", "deliveryAttempt": N}
//     with the data in base64. Pub/Sub writes several fields twice, as
//     messageId and message_id, publishTime and publish_time; either
//     spelling is read (also orderingKey/ordering_key and
//     deliveryAttempt/delivery_attempt), and two spellings that disagree are
//     an error rather than a guess.
//   - [Unwrapped], a push subscription with payload unwrapping: the body is
//     the message data as published, and with write metadata on the rest
//     arrives in headers (below).
//   - [CloudEventBinary], a CloudEvent of type [MessagePublishedType] with
//     its attributes in ce-* headers and [MessagePublishedData] as the body,
//     as Eventarc delivers to Cloud Run and Cloud Functions gen2.
//   - [CloudEventStructured], the same event as one JSON document
//     (Content-Type: application/cloudevents+json), its data inline under
//     "data" or in base64 under "data_base64".
//
// For CloudEvents, Message.ID is the data's messageId and, when the data has
// none, the event id (Pub/Sub sets one to the other, so they match in
// practice); Message.Source is the event source,
// //pubsub.googleapis.com/projects/P/topics/T.
//
// # Detection
//
// [Parse] picks the form from the first rule that matches:
//
//  1. an X-Goog-Pubsub-Message-Id header: unwrapped, except when the body is
//     a wrapped envelope of that same message id, which is taken as wrapped
//     (raw data that merely looks like an envelope names another message or
//     none, and stays data). This rule comes first because an unwrapped push
//     turns every attribute into a header: a message with an attribute
//     ce-specversion, or content-type application/cloudevents+json, is still
//     an unwrapped message, and Pub/Sub's metadata header says so;
//  2. a Ce-Specversion header: binary CloudEvent. Its Ce-Type must be
//     [MessagePublishedType], and it must carry the other attributes the
//     CloudEvents spec requires, as functions-framework does: a spec
//     version 1.0 (or 0.3, whose required attributes are the same), a
//     Ce-Id and a Ce-Source;
//  3. Content-Type application/cloudevents+json (parameters ignored):
//     structured CloudEvent, same rules on specversion, type, id and
//     source;
//  4. otherwise the body must be a JSON object with a "message" object:
//     wrapped.
//
// Anything else is an error wrapping [ErrNotPush] whose text says in one line
// what was wrong ("empty body", "body is not JSON (…)", "body has no message
// object", "message.data is not base64", "message.attributes is a JSON
// number, want string", a CloudEvent type that is not a Pub/Sub message…).
// A delivery without a message id is not an error here: Message.ID is then
// empty and the caller decides (the gateway refuses to run unguarded).
//
// # Reading the JSON
//
// A wrapped body and the data of a messagePublished CloudEvent are the same
// JSON, and one reader decodes both into the Message. A body written the way
// Pub/Sub writes it (known keys, each once, strings without escapes) is read
// in one pass without reflection, about three times as fast as
// encoding/json; any other body goes through encoding/json, which accepts
// what JSON allows and words the errors above. Both fill the same structure,
// with a field for each spelling, and give the same result, which a fuzz
// target checks. A structured CloudEvent is read whole by encoding/json,
// its inline data included.
//
// # Unwrapped headers
//
// The write metadata option is documented as writing the message metadata
// to x-goog-pubsub-<KEY> headers and each attribute to a <KEY> header of its
// own. The metadata headers, matched case-insensitively as net/http does:
//
//   - X-Goog-Pubsub-Message-Id, which also selects the form;
//   - X-Goog-Pubsub-Subscription-Name, the full subscription name;
//   - X-Goog-Pubsub-Publish-Time, RFC 3339;
//   - X-Goog-Pubsub-Ordering-Key, for messages that have one; the spelling
//     X-Goog-Ordering-Key is read as well, second;
//   - X-Goog-Pubsub-Delivery-Attempt: Pub/Sub documents no delivery-attempt
//     header for this form; this name, under the same prefix, is what
//     relays use, and it is read when present.
//
// Attributes as headers have limits:
//
//   - header names are case-insensitive, so Attributes holds them lowercased:
//     an attribute published as "Order_ID" reads as "order_id";
//   - an attribute cannot be told from the request's own headers, so
//     Attributes leaves out the headers of HTTP, of proxies, load balancers
//     and CDNs, of tracing and of Google's front ends (Authorization,
//     Accept*, Content-*, User-Agent, Via, Forwarded, X-Forwarded-*,
//     X-Real-Ip, Traceparent, B3, X-Amzn-Trace-Id, X-Cloud-*, X-Goog-*,
//     Cf-*, X-Envoy-*, …), and an attribute spelled like one of them is lost
//     (Google's own example publishes a Content-Type attribute to set the
//     request's content type): read it from the request;
//   - no such list knows every header a proxy on the way may add, so on this
//     form Attributes may hold a header that is no attribute, and a
//     redelivery may hold other ones. Look attributes up by name
//     (gateway.KeyFromAttribute does); gateway.FingerprintPayload
//     fingerprints this form's data alone, and gateway.FingerprintData the
//     data and the attributes it names;
//   - Ce-* headers are kept: Pub/Sub adds none to an unwrapped push, so they
//     are attributes named like CloudEvents headers (ce-specversion, ce-type…);
//   - a header seen several times contributes its first value.
//
// Without write metadata an unwrapped push carries no message id at all and
// cannot be told from any other request: it is rejected as not a delivery.
//
// # Usage
//
//	func guard(next http.Handler) http.Handler {
//		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//			m, err := pushenvelope.Decode(r, 0) // 0: DefaultMaxBytes
//			var tooLarge *pushenvelope.TooLargeError
//			switch {
//			case errors.As(err, &tooLarge):
//				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
//				return
//			case errors.Is(err, pushenvelope.ErrNotPush):
//				http.Error(w, err.Error(), http.StatusBadRequest)
//				return
//			case err != nil:
//				http.Error(w, "reading the body failed", http.StatusInternalServerError)
//				return
//			}
//			log.Printf("message %s (%s) from %s", m.ID, m.Form, m.Subscription)
//			next.ServeHTTP(w, r.WithContext(pushenvelope.NewContext(r.Context(), m)))
//		})
//	}
//
// Decode restores r.Body, so next reads the body it would have read without
// the guard.
package pushenvelope
