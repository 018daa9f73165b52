// Package pushenvelope decodes a Google Cloud Pub/Sub push delivery into a
// [Message], whichever form it arrived in: [Wrapped] (the default JSON
// body), [Unwrapped] (payload unwrapping with write metadata: the data as
// the body, the rest in x-goog-pubsub-* headers), or a messagePublished
// CloudEvent, [CloudEventBinary] or [CloudEventStructured].
//
// [Parse] picks the form from the headers (X-Goog-Pubsub-Message-Id,
// Ce-Specversion, Content-Type application/cloudevents+json), else reads a
// wrapped body. Both spellings of a field Pub/Sub writes twice are read;
// two that disagree are an error. Anything else is an error wrapping
// [ErrNotPush] that says in one line what was wrong; a delivery without a
// message id is not one (Message.ID is empty). Unwrapped attributes are
// the request's headers, lowercased, less those of HTTP, proxies and
// Google's front ends: look them up by name.
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
// "pushenvelope: decoding a push delivery" in docs/design.md has every rule
// and header.
package pushenvelope
