// Package pushenvelope decodes a Google Cloud Pub/Sub push delivery into a
// [Message], whichever form it arrived in: [Wrapped] (the default JSON
// body), [Unwrapped] (payload unwrapping with write metadata: the data as
// the body, the rest in x-goog-pubsub-* headers), or a messagePublished
// CloudEvent, [CloudEventBinary] or [CloudEventStructured].
//
// [Parse] picks the form by the first rule that matches: an
// X-Goog-Pubsub-Message-Id header (unwrapped, unless the body is the wrapped
// envelope of that same message), a Ce-Specversion header, Content-Type
// application/cloudevents+json, else a JSON object with a "message" object.
// Field spellings Pub/Sub writes twice (messageId and message_id, …) are
// both read, and two that disagree are an error. Anything else is an error
// wrapping [ErrNotPush] that says in one line what was wrong. A delivery
// without a message id is not an error: Message.ID is then empty.
//
// On the unwrapped form, Attributes are the request's headers, lowercased,
// without those of HTTP, proxies, tracing and Google's front ends: an
// attribute spelled like one of them is lost, and a header a proxy adds may
// appear. Look attributes up by name.
//
//	m, err := pushenvelope.Decode(r, 0) // 0: DefaultMaxBytes; r.Body is restored
//	var tooLarge *pushenvelope.TooLargeError
//	switch {
//	case errors.As(err, &tooLarge):
//		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
//	case errors.Is(err, pushenvelope.ErrNotPush):
//		http.Error(w, err.Error(), http.StatusBadRequest)
//	case err != nil:
//		http.Error(w, "reading the body failed", http.StatusInternalServerError)
//	}
//
// docs/design.md ("pushenvelope: decoding a push delivery") has every rule
// and header.
package pushenvelope
