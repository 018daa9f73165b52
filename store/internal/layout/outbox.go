package layout

import (
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store/internal/outboxq"
)

// The message fields the stores' queries use or encode their own way.
const (
	Topic      = "topic"
	Data       = "data"
	Attributes = "attributes" // the store encodes the map[string]string
	OrderKey   = "orderKey"   // outbox.OrderKey; "" when unordered, or dead and released
	Seq        = "seq"        // its place in its order key, from the key's sequence
	Enqueued   = "enqueued"   // when the transaction queued it, plus its index in the transaction (µs)
	Due        = "due"        // when a relay may take it; outboxq.Never when dead
	Died       = "died"       // when a relay gave it up; only dead messages have it
	Holds      = "holds"      // dead and holding its order key's later messages
)

// Message is the layout of an outbox message. Only the fields Take and
// Dead query are indexed: orderKey, seq, enqueued, due and died.
var Message = Fields[outboxq.Stored]{
	of(Topic, func(m *outboxq.Stored) *string { return &m.Topic }),
	of(Data, func(m *outboxq.Stored) *[]byte { return &m.Data }),
	of(Attributes, func(m *outboxq.Stored) *map[string]string { return &m.Attributes }),
	of("orderingKey", func(m *outboxq.Stored) *string { return &m.OrderingKey }),
	index(of(OrderKey, func(m *outboxq.Stored) *string { return &m.OrderKey })),
	index(of(Seq, func(m *outboxq.Stored) *int64 { return &m.Seq })),
	of("version", func(m *outboxq.Stored) *string { return &m.Version }),
	index(of(Enqueued, func(m *outboxq.Stored) *time.Time { return &m.Enqueued })),
	index(of(Due, func(m *outboxq.Stored) *time.Time { return &m.Due })),
	of("token", func(m *outboxq.Stored) *string { return &m.Token }),
	of("name", func(m *outboxq.Stored) *string { return &m.Name }),
	of("attempts", func(m *outboxq.Stored) *int64 { return &m.Attempts }),
	of("reason", func(m *outboxq.Stored) *string { return &m.Reason }),
	omit(index(of(Died, func(m *outboxq.Stored) *time.Time { return &m.Died })), live),
	omit(of(Holds, func(m *outboxq.Stored) *bool { return &m.Holds }), live),
}

func live(m *outboxq.Stored) bool { return m.Died.IsZero() }

func index[T any](f Field[T]) Field[T] {
	f.Indexed = true
	return f
}

// CheckMessage refuses a message read without a topic.
func CheckMessage(m *outboxq.Stored, what string) error {
	if m.Topic == "" {
		return fmt.Errorf("%s %q is missing", what, Topic)
	}
	return nil
}

// Changed reports whether a Take, a Settle or a Revive may change the field.
func Changed(name string) bool {
	switch name {
	case Due, "token", "attempts", "reason", Died, Holds, OrderKey:
		return true
	}
	return false
}
