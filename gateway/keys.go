package gateway

import (
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/pushenvelope"
)

// KeyFunc resolves the idempotency key of a push delivery. An error, or an
// empty key, means the delivery has no key: the gateway then fails closed
// (500) unless Options.AllowUnguarded is set.
type KeyFunc func(m *pushenvelope.Message) (string, error)

// KeyFromMessageID keys on the Pub/Sub messageId (the CloudEvent id for
// CloudEvents; cloudevent.Wrap's default takes an event's source in too,
// for events that are not Pub/Sub messages). It catches transport redelivery, and deliveries of one
// message through several subscriptions sharing a store, but not a producer
// that publishes the same event twice: that gets a new messageId.
//
// Pub/Sub makes a messageId unique within its topic only. Routes fed by
// different topics that share a store may meet one messageId for two
// different messages, and the second is then acknowledged as a duplicate
// without running. Give each such route a key space of its own: a KeyFunc
// that prefixes the messageId with a name for its topic (a push body does
// not carry the topic; the route knows it). Not with the subscription: one
// message through two subscriptions of its topic would then run twice.
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
