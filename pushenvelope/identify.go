package pushenvelope

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxIdentity bounds each string Identify returns.
const maxIdentity = 256

// Identify returns what a log line may say about a request Decode refused:
// the Form Parse chooses from the headers, and the message id, subscription
// and CloudEvent source where headers or body still carry them. It never
// fails or panics; what it cannot read stays empty, and each field is valid
// UTF-8 of at most 256 bytes. body may be nil. Data and Attributes are nil.
func Identify(h http.Header, body []byte) *Message {
	m := &Message{Form: formOf(h)}
	switch m.Form {
	case Unwrapped:
		m.ID, m.Subscription = h.Get(headerMessageID), h.Get(headerSubscription)
	case CloudEventStructured:
		var ev struct {
			ID     any       `json:"id"`
			Source any       `json:"source"`
			Data   looseWire `json:"data"`
		}
		_ = json.Unmarshal(body, &ev) // best effort: whatever was read is kept
		m.ID, m.Source = text(ev.ID), text(ev.Source)
		ev.Data.fill(m)
	case CloudEventBinary:
		m.ID, m.Source = h.Get(headerID), h.Get(headerSource)
		fallthrough
	default:
		var w looseWire
		_ = json.Unmarshal(body, &w)
		w.fill(m)
	}
	m.ID, m.Subscription, m.Source = bounded(m.ID), bounded(m.Subscription), bounded(m.Source)
	return m
}

// formOf is the form Parse chooses from the headers alone.
func formOf(h http.Header) Form {
	if _, ok := h[headerMessageID]; ok {
		return Unwrapped
	}
	if _, ok := h[headerSpecVersion]; ok {
		return CloudEventBinary
	}
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	if strings.EqualFold(strings.TrimSpace(ct), structuredMediaType) {
		return CloudEventStructured
	}
	return Wrapped
}

// looseWire is a wrapped body read for its identity only, its fields of
// any JSON type so that one of the wrong type spoils no other.
type looseWire struct {
	Message *struct {
		MessageID      any `json:"messageId"`
		MessageIDSnake any `json:"message_id"`
	} `json:"message"`
	Subscription any `json:"subscription"`
}

func (w *looseWire) fill(m *Message) {
	if w.Message != nil {
		if id := text(w.Message.MessageID); id != "" {
			m.ID = id
		} else if id := text(w.Message.MessageIDSnake); id != "" {
			m.ID = id
		}
	}
	if s := text(w.Subscription); s != "" {
		m.Subscription = s
	}
}

func text(v any) string {
	s, _ := v.(string)
	return s
}

// bounded makes s valid UTF-8 and cuts it at a rune boundary.
func bounded(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxIdentity {
		return s
	}
	cut := maxIdentity
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
