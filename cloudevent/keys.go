package cloudevent

import (
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// KeyFunc resolves the idempotency key of an event. m is the event's Pub/Sub
// message, decoded once by Wrap, when the event has type
// [pushenvelope.MessagePublishedType]; it is nil for any other event. An
// error, or an empty key, means the event has no key: Wrap then fails the
// event (500) unless Options.AllowUnguarded is set.
type KeyFunc func(e event.Event, m *pushenvelope.Message) (string, error)

// KeyFromID keys on the event id, the default. For a Pub/Sub event the id is
// the messageId (Eventarc sets one to the other, and functions-framework's
// conversion of push bodies does too), so the key is the one
// gateway.KeyFromMessageID gives the same message pushed over HTTP. It
// catches redelivery, not a producer that publishes one event twice.
func KeyFromID(e event.Event, _ *pushenvelope.Message) (string, error) {
	if e.ID() == "" {
		return "", errors.New("the event has no id")
	}
	return e.ID(), nil
}

// KeyFromMessage keys Pub/Sub events with k, a key function of the HTTP
// middleware, such as gateway.KeyFromAttribute or a function of the message
// data. Any other event has no key. KeyFromMessage panics if k is nil.
func KeyFromMessage(k gateway.KeyFunc) KeyFunc {
	if k == nil {
		panic("cloudevent: KeyFromMessage with a nil gateway.KeyFunc")
	}
	return func(e event.Event, m *pushenvelope.Message) (string, error) {
		if m == nil {
			return "", fmt.Errorf("event type %q is not a Pub/Sub message (%s)", e.Type(), pushenvelope.MessagePublishedType)
		}
		return k(m)
	}
}

// KeyFromAttribute keys Pub/Sub events on a message attribute that names the
// business entity (e.g. "order_id"), which also catches producer
// republishes. The key is "name:value", the key gateway.KeyFromAttribute
// gives the same message pushed over HTTP. An event without the attribute
// has no key.
func KeyFromAttribute(name string) KeyFunc {
	return KeyFromMessage(gateway.KeyFromAttribute(name))
}
