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
// name. It is the same on every attempt of the delivery, so a body that
// publishes a message with this key in its [outbox.ChildKeyAttribute]
// attribute, and gives its messages the same names on every attempt,
// makes each republication a duplicate for a downstream route keyed with
// [KeyFromChildKey]. The key reveals nothing of the claim's key, which may
// carry personal data. Messages enqueued through the outbox get their
// child key from the store; this is the key of the one named name (or, for
// an empty Name, named by its position: "0", "1", …).
//
// Outside a guarded body it returns an error matching ErrNoClaim; an empty
// name is an error too.
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
