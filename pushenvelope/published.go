package pushenvelope

import "time"

// PubsubMessage is a Pub/Sub message in the JSON form wrapped push bodies
// and messagePublished CloudEvents carry (the REST PubsubMessage).
// Marshalling writes the camelCase names; unmarshalling also accepts the
// snake_case twins and fails when two spellings disagree. Like [Message],
// it leaves Data nil when empty and Attributes non-nil.
type PubsubMessage struct {
	Data        []byte            `json:"data,omitempty"` // base64 in JSON
	Attributes  map[string]string `json:"attributes,omitempty"`
	MessageID   string            `json:"messageId,omitempty"`
	PublishTime time.Time         `json:"publishTime,omitzero"` // RFC 3339, UTC after decoding
	OrderingKey string            `json:"orderingKey,omitempty"`
}

// MessagePublishedData is the data of a [MessagePublishedType] CloudEvent
// and the body of a wrapped push, for encoding/json. Unmarshalling accepts
// the spellings [PubsubMessage] does (and delivery_attempt) and requires a
// message object.
type MessagePublishedData struct {
	Message         PubsubMessage `json:"message"`
	Subscription    string        `json:"subscription,omitempty"`
	DeliveryAttempt int           `json:"deliveryAttempt,omitempty"`
}

// UnmarshalJSON decodes either spelling of each field, as Parse does.
// Errors wrap ErrNotPush.
func (d *MessagePublishedData) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	m, err := readPublished(b, "JSON")
	if err != nil {
		return err
	}
	*d = MessagePublishedData{Message: pubsubMessage(m), Subscription: m.Subscription, DeliveryAttempt: m.DeliveryAttempt}
	return nil
}

// UnmarshalJSON decodes either spelling of each field. Errors wrap ErrNotPush.
func (p *PubsubMessage) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var w wireMessage
	if err := decodeJSON(b, &w, "JSON"); err != nil {
		return err
	}
	var m Message
	if err := w.fold(&m, ""); err != nil {
		return err
	}
	*p = pubsubMessage(&m)
	return nil
}

func pubsubMessage(m *Message) PubsubMessage {
	return PubsubMessage{Data: m.Data, Attributes: m.Attributes, MessageID: m.ID, PublishTime: m.PublishTime, OrderingKey: m.OrderingKey}
}
