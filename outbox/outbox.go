// Package outbox defines the messages a guarded body publishes through a
// transactional outbox, and the child keys that make their republication
// harmless downstream.
//
// A body that publishes directly duplicates downstream when it is retried
// (a new messageId each time), and publishes a phantom when its
// transaction rolls back. With an outbox the body hands its messages to
// the store's CompleteTx instead: they are written in the body's
// transaction, next to the business writes and the DONE of the record, so
// they commit if and only if the effect commits. A relay (package relay)
// publishes them later, at least once, each carrying a child key derived
// from the claim's key: a republication after a crash then has the same
// child key, and a downstream route keyed on it (gateway.KeyFromChildKey)
// runs it once.
//
// This package holds only types and pure functions; the stores write the
// messages (sqlstore.Store.CompleteTx, and the Google stores' CompleteTx)
// and implement the relay's Source.
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
// child key. Pub/Sub reserves attributes starting with "goog"; this one
// does not, and it is a valid HTTP header name, so it survives unwrapped
// push delivery too.
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
	// topic and ordering key in the order they were enqueued (within one
	// transaction, and across transactions that ran one after the other),
	// each only once the one before was acknowledged by Pub/Sub. The
	// subscription must have message ordering enabled for Pub/Sub to
	// deliver them in that order.
	OrderingKey string

	// Name names the message among those of one delivery, to derive its
	// child key: a body must give the same names on every attempt. Empty
	// means the message's position among those of the CompleteTx call,
	// "0" for the first: a body that enqueues the same messages in the
	// same order on every attempt may leave it empty. Names must be
	// distinct within one call, counting those positions.
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
	// taken, on the store's clock: the relay adds the time it then takes
	// to publish it to measure the publish lag without clock skew.
	Waited time.Duration

	// Attempts is how many publishes of the message failed before this
	// Take (Pub/Sub refused them); 0 for a message never tried.
	Attempts int
}

// Failure is a message a relay took and did not publish, as it gives it
// back to the store (relay.Source's Settle).
type Failure struct {
	Pending

	// Reason is why Pub/Sub refused the message, for an operator: the
	// store counts the failure in the message's Attempts and keeps the
	// reason (cut to 512 bytes). Empty means the message was not tried
	// (the publish of an earlier message of its ordering key failed, or
	// the relay is stopping): nothing is counted.
	Reason string

	// After is how long after Settle, on the store's clock, the message
	// may be taken again: the relay's backoff. Zero means at once. While
	// it waits, the later messages of its ordering key wait behind it.
	After time.Duration

	// Dead gives the message up: it is kept, with its Reason, listed for
	// an operator (relay.DeadLetters) and never taken again until the
	// operator revives it.
	Dead bool

	// Release, for a dead message, lets the later messages of its
	// ordering key be taken past it. Otherwise they wait behind it, as
	// Pub/Sub itself holds the later messages of a key whose publish
	// failed.
	Release bool
}

// Stats is what an outbox holds at one instant, as a store's Stats method
// (relay.Stater) reads it.
type Stats struct {
	// Unsent counts the live messages committed and not yet sent, held
	// or not: the backlog.
	Unsent int64
	// Oldest is how long the oldest of them has waited since its
	// transaction committed, on the clock the store decides with; zero
	// when there is none. A backlog that a relay drains keeps it short; a
	// stuck relay, or a key held behind a failing message, lets it grow.
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

// ChildKey returns the child key of the message called name among those
// published under parent, the key of a claim: a SHA-256 of both, in hex
// (64 characters). It is the same on every attempt, for any process, and
// it reveals neither the parent key nor the name. Different (parent, name)
// pairs give different keys.
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

// Prepare checks msgs, the messages a body enqueues under the claim key
// parent, and returns them as a store writes them: copies, each with its
// Name set (its position when empty) and its child key in Attributes. It
// returns an error, for the body's transaction to fail, when a message
// could not be published (no topic, an attribute Pub/Sub refuses, an
// ordering key over Pub/Sub's limit, a message the Pub/Sub client would
// refuse as oversized: see [PublishSize]) or when two messages share a
// name. The caller's messages and maps are not modified.
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
// its limit on a publish request ([MaxPublishRequestBytes]): the
// encoded message, with its data, attributes and ordering key. Prepare
// counts the child key's attribute in, since the relay publishes it.
func PublishSize(m Message) int {
	return proto.Size(&pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey})
}

// publishLimit is the largest PublishSize the client publishes to topic:
// a request holds the topic's full name and one message, whose length
// prefix the client reserves 5 bytes for. A topic ID is counted as the
// longest full name it could resolve to.
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

// OrderKey returns what orders m among the messages of an outbox: "" when
// m has no ordering key, else a SHA-256, in hex, of its topic's ID and
// its ordering key. A topic's two spellings, "t" and "projects/P/topics/t",
// give one order key, so that a key's messages keep their order however a
// body names the topic. The project is left out because an outbox does
// not know which one a topic ID resolves to; two topics of one ID in two
// projects then share an order, which orders more than Pub/Sub needs and
// never less.
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
