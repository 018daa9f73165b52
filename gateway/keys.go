package gateway

import (
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/pushenvelope"
)

// KeyFunc resolves the idempotency key of a delivery, on every surface. An
// error, or an empty key, means the delivery has no key: it is refused
// unless Options.AllowUnguarded is set.
type KeyFunc func(m *pushenvelope.Message) (string, error)

// KeyFromMessageID keys on the Pub/Sub messageId (a CloudEvent's id). It
// catches redeliveries, and one message through several subscriptions
// sharing a store, but not a producer that publishes an event twice.
// A messageId is unique within its topic only: routes of several topics
// that share a store need a KeyFunc that prefixes it with the topic's name
// (docs/operations.md, "One store for several topics").
func KeyFromMessageID(m *pushenvelope.Message) (string, error) {
	if m.ID == "" {
		return "", errors.New("the delivery has no messageId")
	}
	return m.ID, nil
}

// KeyFromAttribute keys on a message attribute that names the business
// entity (e.g. "order_id"), which also catches producer republishes. The
// key is the attribute's value prefixed with name and a colon, so that keys
// of different attributes never collide in one store.
func KeyFromAttribute(name string) KeyFunc {
	return func(m *pushenvelope.Message) (string, error) {
		v, ok := m.Attributes[name]
		if !ok || v == "" {
			return "", fmt.Errorf("the message has no %q attribute", name)
		}
		return name + ":" + v, nil
	}
}
