package pushenvelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// PubsubMessage is a Pub/Sub message in the JSON form that wrapped push
// bodies and messagePublished CloudEvents carry (the REST PubsubMessage).
//
// Marshalling writes the camelCase names. Unmarshalling also accepts the
// snake_case twins (message_id, publish_time, ordering_key) that push bodies
// carry next to them, and fails when two spellings of one field disagree.
type PubsubMessage struct {
	Data        []byte            `json:"data,omitempty"` // base64 in JSON
	Attributes  map[string]string `json:"attributes,omitempty"`
	MessageID   string            `json:"messageId,omitempty"`
	PublishTime time.Time         `json:"publishTime,omitzero"` // RFC 3339, UTC after decoding
	OrderingKey string            `json:"orderingKey,omitempty"`
}

// MessagePublishedData is the data of a CloudEvent of type
// [MessagePublishedType], {"message": {...}, "subscription": "projects/P/subscriptions/S"}.
// It is also the body of a wrapped push, which may add deliveryAttempt.
// Unmarshalling accepts the same spellings as [PubsubMessage] (and
// delivery_attempt) and requires a message object.
type MessagePublishedData struct {
	Message         PubsubMessage `json:"message"`
	Subscription    string        `json:"subscription,omitempty"`
	DeliveryAttempt int           `json:"deliveryAttempt,omitempty"`
}

// UnmarshalJSON decodes either spelling of each field. Errors wrap ErrNotPush.
func (d *MessagePublishedData) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	out, err := decodePublished(b, "JSON")
	if err != nil {
		return err
	}
	*d = out
	return nil
}

// UnmarshalJSON decodes either spelling of each field. Errors wrap ErrNotPush.
func (m *PubsubMessage) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var w wireMessage
	if err := decodeJSON(b, &w, "JSON"); err != nil {
		return err
	}
	out, err := w.fold("")
	if err != nil {
		return err
	}
	*m = out
	return nil
}

// wirePush is what a wrapped body (and messagePublished data) looks like on
// the wire. It has a field for each spelling, so one encoding/json pass reads
// either; published then checks that twins agree.
type wirePush struct {
	Message              *wireMessage `json:"message"` // nil when absent or null
	Subscription         string       `json:"subscription"`
	DeliveryAttempt      int          `json:"deliveryAttempt"`
	DeliveryAttemptSnake int          `json:"delivery_attempt"`
}

type wireMessage struct {
	Data             base64Data        `json:"data"`
	Attributes       map[string]string `json:"attributes"`
	MessageID        string            `json:"messageId"`
	MessageIDSnake   string            `json:"message_id"`
	PublishTime      string            `json:"publishTime"`
	PublishTimeSnake string            `json:"publish_time"`
	OrderingKey      string            `json:"orderingKey"`
	OrderingKeySnake string            `json:"ordering_key"`
}

// decodePublished decodes a wrapped body or messagePublished data; what
// names the document in reasons ("body").
func decodePublished(b []byte, what string) (MessagePublishedData, error) {
	var w wirePush
	if err := decodeWire(b, &w, what); err != nil {
		return MessagePublishedData{}, err
	}
	return w.published(b, what, "")
}

// decodeWire decodes a wrapped body into w: on the fast path when the body
// is written as Pub/Sub writes it, with encoding/json otherwise.
func decodeWire(b []byte, w *wirePush, what string) error {
	if scanWire(b, w) {
		return nil
	}
	*w = wirePush{}
	return decodeJSON(b, w, what)
}

// published validates w, decoded from doc. path is w's JSON path in doc
// ("data." in a structured CloudEvent), so reasons name fields as the sender
// wrote them.
func (w *wirePush) published(doc []byte, what, path string) (MessagePublishedData, error) {
	if w.Message == nil {
		return MessagePublishedData{}, noMessage(doc, what, path)
	}
	msg, err := w.Message.fold(path + "message.")
	if err != nil {
		return MessagePublishedData{}, err
	}
	attempt, err := twin(w.DeliveryAttempt, w.DeliveryAttemptSnake, path, "deliveryAttempt", "delivery_attempt")
	if err != nil {
		return MessagePublishedData{}, err
	}
	if attempt < 0 {
		return MessagePublishedData{}, notPush("%sdeliveryAttempt is negative", path)
	}
	return MessagePublishedData{Message: msg, Subscription: w.Subscription, DeliveryAttempt: attempt}, nil
}

// noMessage tells a null message from a missing one. It runs on the error
// path only, so that the common path parses the body once.
func noMessage(doc []byte, what, path string) error {
	var probe struct {
		Message json.RawMessage `json:"message"`
		Data    struct {
			Message json.RawMessage `json:"message"`
		} `json:"data"`
	}
	_ = json.Unmarshal(doc, &probe) // doc has been decoded once already
	msg := probe.Message
	if path == "data." {
		msg = probe.Data.Message
	}
	if string(msg) == "null" {
		return notPush("%smessage is null", path)
	}
	return notPush("%s has no message object", what)
}

// fold merges the twin spellings and parses the publish time. path prefixes
// field names in reasons ("message.").
func (w *wireMessage) fold(path string) (PubsubMessage, error) {
	id, err := twin(w.MessageID, w.MessageIDSnake, path, "messageId", "message_id")
	if err != nil {
		return PubsubMessage{}, err
	}
	key, err := twin(w.OrderingKey, w.OrderingKeySnake, path, "orderingKey", "ordering_key")
	if err != nil {
		return PubsubMessage{}, err
	}
	ts, err := twin(w.PublishTime, w.PublishTimeSnake, path, "publishTime", "publish_time")
	if err != nil {
		return PubsubMessage{}, err
	}
	var at time.Time
	if ts != "" {
		if at, err = time.Parse(time.RFC3339, ts); err != nil {
			return PubsubMessage{}, notPush("%spublishTime %q is not an RFC 3339 time", path, ts)
		}
		at = at.UTC()
	}
	return PubsubMessage{Data: w.Data, Attributes: w.Attributes, MessageID: id, PublishTime: at, OrderingKey: key}, nil
}

// twin returns whichever of the camelCase and snake_case values is set, and
// an error if both are set and differ: guessing which one the sender meant
// could give two different messages one idempotency key.
func twin[T comparable](camel, snake T, path, camelName, snakeName string) (T, error) {
	var zero T
	switch {
	case snake == zero || snake == camel:
		return camel, nil
	case camel == zero:
		return snake, nil
	}
	return zero, notPush("%s%s and %s%s disagree", path, camelName, path, snakeName)
}

// toMessage builds the Message. For CloudEvents, id and source come from the
// event: the message's own messageId wins when present (Pub/Sub sets the event
// id to it, so they match in practice) and the event id stands in when the
// data carries none.
func (d *MessagePublishedData) toMessage(form Form, id, source string) *Message {
	m := &Message{
		ID:              d.Message.MessageID,
		Data:            d.Message.Data,
		Attributes:      d.Message.Attributes,
		PublishTime:     d.Message.PublishTime,
		OrderingKey:     d.Message.OrderingKey,
		Subscription:    d.Subscription,
		DeliveryAttempt: d.DeliveryAttempt,
		Source:          source,
		Form:            form,
	}
	if m.ID == "" {
		m.ID = id
	}
	if len(m.Data) == 0 {
		m.Data = nil
	}
	if m.Attributes == nil {
		m.Attributes = map[string]string{}
	}
	return m
}

// base64Data is message.data: standard base64 with padding, as Pub/Sub
// writes it. Decoding it here rather than as a plain []byte lets a bad value
// fail with its JSON path (encoding/json adds the path to an
// *UnmarshalTypeError, not to a base64 error).
type base64Data []byte

var base64DataType = reflect.TypeFor[base64Data]()

// notBase64 is the UnmarshalTypeError.Value that marks a string that is not
// base64, as opposed to a value that is not a string.
const notBase64 = "string that is not base64"

// UnmarshalJSON decodes a JSON string of base64; null leaves p unchanged.
func (p *base64Data) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: base64DataType}
	}
	s := b[1 : len(b)-1]
	if bytes.IndexByte(s, '\\') >= 0 { // escaped, e.g. "\/": unquote first (rare)
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		s = []byte(str)
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(out, s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: notBase64, Type: base64DataType}
	}
	*p = out[:n]
	return nil
}

// jsonKind names the kind of a JSON value from its first byte.
func jsonKind(b []byte) string {
	switch {
	case len(b) == 0:
		return "value"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	}
	return "number"
}

// decodeJSON unmarshals b into v and turns failures into one-line ErrNotPush
// reasons; what names the document ("body").
func decodeJSON(b []byte, v any, what string) error {
	if len(b) == 0 {
		return notPush("empty %s", what)
	}
	err := json.Unmarshal(b, v)
	if err == nil {
		return nil
	}
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return notPush("%s is not JSON (%v)", what, syntax)
	case errors.As(err, &typ) && typ.Type == base64DataType:
		field := typ.Field
		if field == "" { // GOEXPERIMENT=jsonv2 does not add the path
			field = "message.data"
		}
		if typ.Value == notBase64 {
			return notPush("%s is not base64", field)
		}
		return notPush("%s is a JSON %s, want a base64 string", field, typ.Value)
	case errors.As(err, &typ) && typ.Field == "":
		return notPush("%s is a JSON %s, not an object", what, typ.Value)
	case errors.As(err, &typ):
		return notPush("%s is a JSON %s, want %s", typ.Field, typ.Value, kindName(typ.Type))
	}
	return notPush("%s: %v", what, err)
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int:
		return "integer"
	}
	return "object"
}

// notPush returns an error wrapping ErrNotPush with a one-line reason.
func notPush(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotPush}, args...)...)
}
