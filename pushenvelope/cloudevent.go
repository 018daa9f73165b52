package pushenvelope

import (
	"encoding/base64"
	"net/http"
)

// MessagePublishedType is the CloudEvent type of a Pub/Sub message, the only
// type this package decodes.
const MessagePublishedType = "google.cloud.pubsub.topic.v1.messagePublished"

// The binary-mode attribute headers besides Ce-Specversion.
const (
	headerType   = "Ce-Type"
	headerID     = "Ce-Id"
	headerSource = "Ce-Source"
)

// FromMessagePublishedData decodes the data of a [MessagePublishedType]
// CloudEvent whose attributes were read elsewhere (by a CloudEvents SDK).
// id and source are the event's; the data's messageId wins over id. Form is
// CloudEventBinary. Errors wrap ErrNotPush.
func FromMessagePublishedData(id, source string, data []byte) (*Message, error) {
	m, err := readPublished(data, "CloudEvent data")
	if err != nil {
		return nil, err
	}
	return fromEvent(m, CloudEventBinary, id, source), nil
}

// checkEvent refuses an event that is not messagePublished or lacks a
// required attribute, as functions-framework's SDK does.
func checkEvent(spec, id, source, typ string) error {
	switch {
	case spec == "":
		return notPush("CloudEvent has no specversion")
	case spec != "1.0" && spec != "0.3":
		return notPush("CloudEvent specversion %q is not 1.0 (or 0.3)", spec)
	case typ != MessagePublishedType:
		return notPush("CloudEvent type %q is not %s", typ, MessagePublishedType)
	case id == "":
		return notPush("CloudEvent has no id")
	case source == "":
		return notPush("CloudEvent has no source")
	}
	return nil
}

func parseBinaryEvent(h http.Header, body []byte) (*Message, error) {
	if err := checkEvent(h.Get(headerSpecVersion), h.Get(headerID), h.Get(headerSource), h.Get(headerType)); err != nil {
		return nil, err
	}
	return FromMessagePublishedData(h.Get(headerID), h.Get(headerSource), body)
}

// structuredEvent is a structured-mode CloudEvent, its data decoded in the
// same pass.
type structuredEvent struct {
	SpecVersion string    `json:"specversion"`
	Type        string    `json:"type"`
	ID          string    `json:"id"`
	Source      string    `json:"source"`
	Data        *wirePush `json:"data"`
	DataBase64  *string   `json:"data_base64"`
}

func parseStructuredEvent(body []byte) (*Message, error) {
	var ev structuredEvent
	if err := decodeJSON(body, &ev, "CloudEvent"); err != nil {
		return nil, err
	}
	if err := checkEvent(ev.SpecVersion, ev.ID, ev.Source, ev.Type); err != nil {
		return nil, err
	}
	var (
		m   *Message
		err error
	)
	switch {
	case ev.Data != nil && ev.DataBase64 != nil:
		return nil, notPush("CloudEvent has both data and data_base64")
	case ev.Data != nil:
		m, err = ev.Data.message(body, "CloudEvent data", "data.")
	case ev.DataBase64 != nil:
		raw, derr := base64.StdEncoding.DecodeString(*ev.DataBase64)
		if derr != nil {
			return nil, notPush("CloudEvent data_base64 is not base64 (%v)", derr)
		}
		m, err = readPublished(raw, "CloudEvent data_base64")
	default:
		return nil, notPush("CloudEvent has no data")
	}
	if err != nil {
		return nil, err
	}
	return fromEvent(m, CloudEventStructured, ev.ID, ev.Source), nil
}

// fromEvent completes m with the event's attributes; the event id stands in
// for a messageId the data lacks.
func fromEvent(m *Message, form Form, id, source string) *Message {
	if m.ID == "" {
		m.ID = id
	}
	m.Source, m.Form = source, form
	return m
}
