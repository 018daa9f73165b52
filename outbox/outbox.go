// Package outbox defines the messages a guarded body publishes through a
// transactional outbox, and the child keys that make their republication
// harmless downstream.
//
// A body hands its messages to the store's CompleteTx, which writes them
// in the body's transaction, so they commit if and only if the effect
// does. A relay (package relay) publishes them, at least once, each
// carrying a child key derived from the claim's key, which a downstream
// route keyed with gateway.KeyFromChildKey runs once (docs/design.md,
// "Exactly-once pipelines"). This package holds only types and pure
// functions; the stores write the messages and implement relay.Source.
package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// ChildKeyAttribute is the Pub/Sub attribute that carries a message's
// child key; a valid HTTP header name, it survives unwrapped push delivery.
const ChildKeyAttribute = "idemgate-child-key"

// Message is one message a body publishes through the outbox. It is
// written in the body's transaction by the store's CompleteTx and
// published by a relay once that transaction commits.
type Message struct {
	// Topic is the topic to publish to: a topic ID, resolved in the
	// relay's project, or a full name "projects/P/topics/T". Required.
	Topic string

	// Data is the message's payload. It may be empty.
	Data []byte

	// Attributes are the message's attributes. ChildKeyAttribute is
	// reserved: the store sets it. Names must not start with "goog".
	Attributes map[string]string

	// OrderingKey, when set, makes the relay publish the messages of one
	// topic and ordering key in enqueue order, each once the one before
	// was acknowledged. The subscription needs message ordering enabled
	// for Pub/Sub to deliver them in that order.
	OrderingKey string

	// Name names the message among those of one delivery, to derive its
	// child key: a body must give the same names on every attempt. Empty
	// means its position in the CompleteTx call ("0" for the first). Names
	// must be distinct within one call, counting those positions.
	Name string
}

// Pending is an outbox message as a relay takes it from a store: committed
// and not yet marked sent.
type Pending struct {
	// Message is the message as enqueued, with Attributes holding
	// ChildKeyAttribute. Name is set by Prepare (the name the child key
	// was derived from); stores need not keep it.
	Message

	// ChildKey is the message's child key, also in
	// Attributes[ChildKeyAttribute].
	ChildKey string

	// ID identifies the message in its store; opaque to the relay.
	ID string

	// Token identifies the Take that handed the message out; the store
	// uses it to give back only the messages that Take still holds.
	Token string

	// Waited is how long the message had been committed when it was
	// taken, on the store's clock (the relay measures lag from it).
	Waited time.Duration

	// Attempts is how many publishes of the message failed before this
	// Take (Pub/Sub refused them); 0 for a message never tried.
	Attempts int
}

// Failure is a message a relay took and did not publish, as it gives it
// back to the store (relay.Source's Settle).
type Failure struct {
	Pending

	// Reason is why Pub/Sub refused the message: the store counts the
	// failure in Attempts and keeps the reason (cut to 512 bytes). Empty
	// means the message was not tried: nothing is counted.
	Reason string

	// After is how long after Settle, on the store's clock, the message
	// may be taken again (zero: at once); the later messages of its
	// ordering key wait behind it.
	After time.Duration

	// Dead gives the message up: it is kept, with its Reason, listed for
	// an operator (relay.DeadLetters) and never taken again until the
	// operator revives it.
	Dead bool

	// Release, for a dead message, lets the later messages of its
	// ordering key be taken past it; otherwise they wait behind it.
	Release bool
}

// Stats is what an outbox holds at one instant, as a store's Stats method
// (relay.Stater) reads it.
type Stats struct {
	// Unsent counts the live messages committed and not yet sent, held
	// or not: the backlog.
	Unsent int64
	// Oldest is how long the oldest of them has waited since its commit,
	// on the store's clock; zero when there is none.
	Oldest time.Duration
	// Dead counts the messages given up, kept for an operator.
	Dead int64
}

// DeadMessage is a message a relay gave up on.
type DeadMessage struct {
	// Pending is the message; its Token is empty and its Waited is how
	// long it has been committed.
	Pending

	// Reason is the last failure's Reason.
	Reason string

	// Died is when the relay gave it up, on the store's clock.
	Died time.Time

	// Holds says that the later messages of its ordering key wait behind
	// it ([Failure].Release was false).
	Holds bool
}

// ChildKey returns the child key of the message called name published
// under parent, a claim's key: a SHA-256 of both in hex (64 characters),
// the same in every process, revealing neither; distinct pairs give
// distinct keys.
func ChildKey(parent, name string) string {
	h := sha256.New()
	// Length-prefixed, so that no two pairs share an input.
	h.Write([]byte("idemgate child key v1\x00"))
	h.Write([]byte(strconv.Itoa(len(parent))))
	h.Write([]byte{0})
	h.Write([]byte(parent))
	h.Write([]byte(name))
	return hex.EncodeToString(h.Sum(nil))
}

// Pub/Sub's limits on a message, checked at enqueue so that a message the
// relay could never publish fails the body's transaction instead.
const (
	maxAttributes     = 100
	maxAttributeKey   = 256
	maxAttributeValue = 1024
	maxOrderingKey    = 1024
	// maxProjectID is the longest project ID: a topic given by its ID is
	// counted in the longest name the relay could resolve it to.
	maxProjectID = 30
	// MaxPublishRequestBytes is the Pub/Sub client's limit on a publish
	// request (pubsub.MaxPublishRequestBytes).
	MaxPublishRequestBytes = 10_000_000
)

// Prepare checks msgs, enqueued under the claim key parent, and returns
// copies as a store writes them, each with its Name set and its child key
// in Attributes; the caller's messages and maps are not modified. It
// fails, to fail the body's transaction, when a message could not be
// published (a bad topic or attribute, an ordering key or a size over
// Pub/Sub's limits: see [PublishSize]) or two share a name.
func Prepare(parent string, msgs []Message) ([]Pending, error) {
	if parent == "" {
		return nil, errors.New("outbox: empty parent key")
	}
	out := make([]Pending, len(msgs))
	names := make(map[string]struct{}, len(msgs))
	for i, m := range msgs {
		if m.Name == "" {
			m.Name = strconv.Itoa(i)
		}
		if _, dup := names[m.Name]; dup {
			return nil, fmt.Errorf("outbox: message %d: name %.80q is given twice (an empty Name is the message's position)", i, m.Name)
		}
		names[m.Name] = struct{}{}
		if err := check(m); err != nil {
			return nil, fmt.Errorf("outbox: message %d (%.80q): %w", i, m.Name, err)
		}
		ck := ChildKey(parent, m.Name)
		attrs := make(map[string]string, len(m.Attributes)+1)
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		attrs[ChildKeyAttribute] = ck
		m.Attributes = attrs
		if n, limit := PublishSize(m), publishLimit(m.Topic); n > limit {
			return nil, fmt.Errorf("outbox: message %d (%.80q): %d bytes as the Pub/Sub client counts it (data, attributes with the child key, ordering key), over the %d it publishes to topic %.80q", i, m.Name, n, limit, m.Topic)
		}
		out[i] = Pending{Message: m, ChildKey: ck}
	}
	return out, nil
}

// check refuses a message Pub/Sub would refuse.
func check(m Message) error {
	if err := checkTopic(m.Topic); err != nil {
		return err
	}
	switch {
	case len(m.OrderingKey) > maxOrderingKey:
		return fmt.Errorf("ordering key of %d bytes is over Pub/Sub's %d", len(m.OrderingKey), maxOrderingKey)
	case len(m.Attributes) >= maxAttributes:
		// One is the child key's.
		return fmt.Errorf("%d attributes, and Pub/Sub takes %d counting the child key's", len(m.Attributes), maxAttributes)
	}
	for k, v := range m.Attributes {
		switch {
		case k == ChildKeyAttribute:
			return fmt.Errorf("attribute %q is reserved: the store sets it", k)
		case k == "" || len(k) > maxAttributeKey:
			return fmt.Errorf("attribute name of %d bytes: Pub/Sub takes 1 to %d", len(k), maxAttributeKey)
		case strings.HasPrefix(strings.ToLower(k), "goog"):
			return fmt.Errorf("attribute %.80q: names starting with \"goog\" are Pub/Sub's", k)
		case len(v) > maxAttributeValue:
			return fmt.Errorf("attribute %.80q: value of %d bytes is over Pub/Sub's %d", k, len(v), maxAttributeValue)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return fmt.Errorf("attribute %.80q: not valid UTF-8", k)
		}
	}
	if !utf8.ValidString(m.OrderingKey) {
		return errors.New("ordering key: not valid UTF-8")
	}
	return nil
}

// topicIDRE is Pub/Sub's rule for a topic ID.
var topicIDRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$`)

// checkTopic accepts a topic ID or a full topic name.
func checkTopic(t string) error {
	id := t
	if strings.HasPrefix(t, "projects/") {
		parts := strings.Split(t, "/")
		if len(parts) != 4 || parts[1] == "" || parts[2] != "topics" {
			return fmt.Errorf("topic %.80q is neither an ID nor projects/P/topics/T", t)
		}
		id = parts[3]
	}
	if !topicIDRE.MatchString(id) || strings.HasPrefix(id, "goog") {
		return fmt.Errorf("topic %.80q: an ID is a letter and 2 to 254 letters, digits or -_.~+%%, not starting with \"goog\"", t)
	}
	return nil
}

// PublishSize is the size of m as the Pub/Sub client counts it against
// [MaxPublishRequestBytes]: the encoded message, with its data,
// attributes and ordering key.
func PublishSize(m Message) int {
	return proto.Size(&pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey})
}

// publishLimit is the largest PublishSize the client publishes to topic
// (an ID counted as the longest full name it could resolve to).
func publishLimit(topic string) int {
	name := topic
	if !strings.HasPrefix(topic, "projects/") {
		name = "projects/" + strings.Repeat("p", maxProjectID) + "/topics/" + topic
	}
	return MaxPublishRequestBytes - (1 + protowire.SizeVarint(uint64(len(name))) + len(name)) - 5
}

// TopicID returns the ID of topic, given as an ID or as a full name
// "projects/P/topics/T".
func TopicID(topic string) string {
	if strings.HasPrefix(topic, "projects/") {
		return topic[strings.LastIndexByte(topic, '/')+1:]
	}
	return topic
}

// OrderKey returns what orders a message among those of an outbox: ""
// without an ordering key, else a SHA-256 in hex of its topic's ID and
// ordering key, so that a topic's two spellings share one order. (Two
// topics of one ID in two projects share it too: more order, never less.)
func OrderKey(topic, orderingKey string) string {
	if orderingKey == "" {
		return ""
	}
	id := TopicID(topic)
	h := sha256.New()
	h.Write([]byte("idemgate order key v1\x00"))
	h.Write([]byte(strconv.Itoa(len(id))))
	h.Write([]byte{0})
	h.Write([]byte(id))
	h.Write([]byte(orderingKey))
	return hex.EncodeToString(h.Sum(nil))
}
