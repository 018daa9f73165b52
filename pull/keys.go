package pull

import (
	"errors"
	"fmt"

	"cloud.google.com/go/pubsub/v2"
)

// KeyFunc resolves the idempotency key of a pulled message. An error, or an
// empty key, means the message has no key: Wrap then nacks it (fail closed)
// unless Options.AllowUnguarded is set.
type KeyFunc func(m *pubsub.Message) (string, error)

// KeyFromMessageID keys on the Pub/Sub message ID, the default. It catches
// redelivery, and deliveries of one message through several subscriptions
// (pull or push) that share a store, but not a producer that publishes the
// same event twice: each publish gets a new message ID.
func KeyFromMessageID(m *pubsub.Message) (string, error) {
	if m.ID == "" {
		return "", errors.New("the message has no ID")
	}
	return m.ID, nil
}

// KeyFromAttribute keys on a message attribute that names the business
// entity (e.g. "order_id"), which also catches producer republishes. The
// key is the attribute's value prefixed with name and a colon, exactly as
// gateway.KeyFromAttribute makes it, so that push and pull consumers of one
// store agree on keys, and keys of different attributes never collide.
func KeyFromAttribute(name string) KeyFunc {
	return func(m *pubsub.Message) (string, error) {
		v, ok := m.Attributes[name]
		if !ok || v == "" {
			return "", fmt.Errorf("the message has no %q attribute", name)
		}
		return name + ":" + v, nil
	}
}
