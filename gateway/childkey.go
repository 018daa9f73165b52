package gateway

import (
	"context"
	"errors"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/pushenvelope"
)

// ErrNoClaim is returned by ChildKey outside the body of Lock or Mutex:
// there is no claim to derive a child key from.
var ErrNoClaim = errors.New("gateway: no claim in the context: child keys exist only in a guarded body")

// ChildKey returns the child key of the message called name that the body
// running under ctx publishes: [outbox.ChildKey] of the claim's key and
// name, the same on every attempt of the delivery and revealing nothing of
// the claim's key. A message published with it in its
// [outbox.ChildKeyAttribute] attribute is a duplicate, downstream on a
// route keyed with [KeyFromChildKey], when an attempt publishes it again.
// Outside a guarded body it returns ErrNoClaim; an empty name is an error.
func ChildKey(ctx context.Context, name string) (string, error) {
	c, ok := ClaimFromContext(ctx)
	if !ok {
		return "", ErrNoClaim
	}
	if name == "" {
		return "", errors.New("gateway: empty child name")
	}
	return outbox.ChildKey(c.Key, name), nil
}

// KeyFromChildKey keys on the child key a message carries in its
// [outbox.ChildKeyAttribute] attribute, and on the messageId (see
// [KeyFromMessageID]) when it has none. It is the key function of a
// route fed by a stage that publishes through the outbox: a message the
// relay publishes twice, or that the stage enqueued on two attempts of
// one delivery, runs once.
func KeyFromChildKey(m *pushenvelope.Message) (string, error) {
	if v := m.Attributes[outbox.ChildKeyAttribute]; v != "" {
		return v, nil
	}
	return KeyFromMessageID(m)
}
