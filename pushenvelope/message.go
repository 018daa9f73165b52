package pushenvelope

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Form is the shape a delivery arrived in.
type Form uint8

// The delivery forms Decode understands.
const (
	Wrapped              Form = iota + 1 // the default push body, {"message": {...}, "subscription": "..."}
	Unwrapped                            // payload unwrapping: the data as the body, metadata in headers
	CloudEventBinary                     // a CloudEvent in binary mode (ce-* headers), as Eventarc delivers
	CloudEventStructured                 // a CloudEvent in structured mode (application/cloudevents+json)
)

// String returns "wrapped", "unwrapped", "cloudevent-binary" or "cloudevent-structured".
func (f Form) String() string {
	switch f {
	case Wrapped:
		return "wrapped"
	case Unwrapped:
		return "unwrapped"
	case CloudEventBinary:
		return "cloudevent-binary"
	case CloudEventStructured:
		return "cloudevent-structured"
	}
	return "unknown"
}

// Message is one decoded Pub/Sub delivery, whatever form it came in.
type Message struct {
	// ID is the Pub/Sub messageId (for a CloudEvent without one, the event
	// id); empty when the delivery carried none.
	ID string
	// Data is the message payload, decoded from base64 where the form
	// encodes it; nil when empty. It may share memory with the body.
	Data            []byte
	Attributes      map[string]string // never nil after a successful Decode
	PublishTime     time.Time         // UTC; zero when absent
	OrderingKey     string
	Subscription    string // the full subscription name, when the delivery says it
	DeliveryAttempt int    // with a dead-letter policy; 0 means unknown
	// Source is the CloudEvent source, //pubsub.googleapis.com/projects/P/topics/T;
	// empty for plain push forms.
	Source string
	Form   Form
}

// ErrNotPush is wrapped by the error Decode returns when the request is not a
// Pub/Sub push delivery in any known form; the message says why in one line.
var ErrNotPush = errors.New("pushenvelope: not a Pub/Sub push delivery")

func notPush(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotPush}, args...)...)
}

// TooLargeError is returned when the body exceeds the size limit.
type TooLargeError struct {
	Limit int64 // bytes
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("pushenvelope: body larger than %d bytes", e.Limit)
}

type ctxKey struct{}

// NewContext returns a context that carries m.
func NewContext(ctx context.Context, m *Message) context.Context {
	return context.WithValue(ctx, ctxKey{}, m)
}

// FromContext returns the Message stored by NewContext.
func FromContext(ctx context.Context) (*Message, bool) {
	m, ok := ctx.Value(ctxKey{}).(*Message)
	return m, ok
}
