package pushenvelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"time"
)

func parseWrapped(body []byte) (*Message, error) {
	m, err := readPublished(body, "body")
	if err != nil {
		return nil, err
	}
	m.Form = Wrapped
	return m, nil
}

// wrappedEnvelope returns the Message in body if body is a wrapped envelope
// whose messageId is id, and nil otherwise; a miss costs at most one parse.
func wrappedEnvelope(body []byte, id string) *Message {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil
	}
	var w wirePush
	if readWire(body, &w, "body") != nil || w.Message == nil {
		return nil
	}
	m, err := w.message(body, "body", "")
	if err != nil || m.ID != id {
		return nil
	}
	m.Form = Wrapped
	return m
}

// wirePush is a wrapped body (or messagePublished data) as on the wire, the
// one representation scanWire and encoding/json fill, with a field for each
// spelling; message checks that twins agree.
type wirePush struct {
	Message              *wireMessage `json:"message"` // nil when absent or null
	Subscription         string       `json:"subscription"`
	DeliveryAttempt      int          `json:"deliveryAttempt"`
	DeliveryAttemptSnake int          `json:"delivery_attempt"`
}

// wireMessage is the message object of a wirePush.
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

// readPublished decodes a wrapped body or messagePublished data into a
// Message whose Form the caller sets; what names doc in reasons ("body").
func readPublished(doc []byte, what string) (*Message, error) {
	var w wirePush
	if err := readWire(doc, &w, what); err != nil {
		return nil, err
	}
	return w.message(doc, what, "")
}

// readWire decodes b into w, by scanWire when it can, the one place the fast
// path is taken.
func readWire(b []byte, w *wirePush, what string) error {
	if scanWire(b, w) {
		return nil
	}
	*w = wirePush{}
	return decodeJSON(b, w, what)
}

// message validates w, decoded from doc, and returns its Message. path is
// w's JSON path in doc ("data." in a structured CloudEvent) for reasons.
func (w *wirePush) message(doc []byte, what, path string) (*Message, error) {
	if w.Message == nil {
		return nil, noMessage(doc, what, path)
	}
	m := &Message{Subscription: w.Subscription}
	if err := w.Message.fold(m, path+"message."); err != nil {
		return nil, err
	}
	attempt, err := twin(w.DeliveryAttempt, w.DeliveryAttemptSnake, path, "deliveryAttempt", "delivery_attempt")
	if err != nil {
		return nil, err
	}
	if attempt < 0 {
		return nil, notPush("%sdeliveryAttempt is negative", path)
	}
	m.DeliveryAttempt = attempt
	return m, nil
}

// noMessage tells a null message from a missing one, on the error path
// only, so that the common path parses the body once.
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

// fold merges the twin spellings into m, Data nil when empty and
// Attributes never nil. path prefixes field names in reasons.
func (w *wireMessage) fold(m *Message, path string) error {
	id, err := twin(w.MessageID, w.MessageIDSnake, path, "messageId", "message_id")
	if err != nil {
		return err
	}
	key, err := twin(w.OrderingKey, w.OrderingKeySnake, path, "orderingKey", "ordering_key")
	if err != nil {
		return err
	}
	ts, err := twin(w.PublishTime, w.PublishTimeSnake, path, "publishTime", "publish_time")
	if err != nil {
		return err
	}
	if ts != "" {
		at, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return notPush("%spublishTime %q is not an RFC 3339 time", path, ts)
		}
		m.PublishTime = at.UTC()
	}
	m.ID, m.OrderingKey, m.Data, m.Attributes = id, key, w.Data, w.Attributes
	if len(m.Data) == 0 {
		m.Data = nil
	}
	if m.Attributes == nil {
		m.Attributes = map[string]string{}
	}
	return nil
}

// twin returns whichever of the camelCase and snake_case values is set, and
// an error if both are set and differ.
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

// base64Data is message.data, standard base64, decoded by its own type so
// that a bad value fails with its JSON path (an *UnmarshalTypeError).
type base64Data []byte

var base64DataType = reflect.TypeFor[base64Data]()

// notBase64 is the UnmarshalTypeError.Value of a string that is not base64.
const notBase64 = "string that is not base64"

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

// decodeJSON unmarshals b into v, turning failures into one-line ErrNotPush
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
