package pushenvelope_test

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgate/idemgate/pushenvelope"
)

// Identify keeps what a refused request still says about itself, for its
// log line, whatever else is wrong with it.
func TestIdentify(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		name            string
		h               http.Header
		body            string
		form            pushenvelope.Form
		id, sub, source string
	}{
		{name: "wrapped, data not base64", h: hdr(), body: `{"message":{"messageId":"42","data":"%%%"},"subscription":"projects/p/subscriptions/s"}`,
			form: pushenvelope.Wrapped, id: "42", sub: "projects/p/subscriptions/s"},
		{name: "wrapped, snake case, attribute of the wrong type", h: hdr(), body: `{"message":{"message_id":"43","attributes":{"a":1}},"subscription":"s"}`,
			form: pushenvelope.Wrapped, id: "43", sub: "s"},
		{name: "wrapped, id of the wrong type", h: hdr(), body: `{"message":{"messageId":42},"subscription":"s"}`,
			form: pushenvelope.Wrapped, sub: "s"},
		{name: "not JSON", h: hdr(), body: "not json", form: pushenvelope.Wrapped},
		{name: "no body (over the limit)", h: hdr(), form: pushenvelope.Wrapped},
		{name: "unwrapped, bad publish time", h: hdr("X-Goog-Pubsub-Message-Id", "44", "X-Goog-Pubsub-Subscription-Name", "s", "X-Goog-Pubsub-Publish-Time", "yesterday"),
			body: "raw", form: pushenvelope.Unwrapped, id: "44", sub: "s"},
		{name: "binary CloudEvent of another type", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "45", "Ce-Source", "//src", "Ce-Type", "other"),
			form: pushenvelope.CloudEventBinary, id: "45", source: "//src"},
		{name: "binary CloudEvent, the message's id wins", h: hdr("Ce-Specversion", "1.0", "Ce-Id", "ev", "Ce-Type", "other"),
			body: `{"message":{"messageId":"46"},"subscription":"s"}`, form: pushenvelope.CloudEventBinary, id: "46", sub: "s"},
		{name: "structured CloudEvent without data", h: hdr("Content-Type", "application/cloudevents+json; charset=utf-8"),
			body: `{"specversion":"1.0","id":"47","source":"//src","type":"t"}`, form: pushenvelope.CloudEventStructured, id: "47", source: "//src"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := pushenvelope.Identify(tc.h, []byte(tc.body))
			if m.Form != tc.form || m.ID != tc.id || m.Subscription != tc.sub || m.Source != tc.source {
				t.Errorf("Identify = form %v, id %q, subscription %q, source %q; want %v, %q, %q, %q",
					m.Form, m.ID, m.Subscription, m.Source, tc.form, tc.id, tc.sub, tc.source)
			}
		})
	}
}

// A refused request's identity is bounded and valid UTF-8, for the log.
func TestIdentifyBounds(t *testing.T) {
	long := strings.Repeat("é", 1000) + "\xff"
	m := pushenvelope.Identify(http.Header{"X-Goog-Pubsub-Message-Id": {long}}, nil)
	if len(m.ID) > 256+len("…") || !utf8.ValidString(m.ID) {
		t.Errorf("ID of %d bytes (valid UTF-8: %v), want at most 256 and valid", len(m.ID), utf8.ValidString(m.ID))
	}
	for _, tc := range []struct{ name, id, want string }{
		{"exactly 256 bytes, kept whole", strings.Repeat("a", 256), strings.Repeat("a", 256)},
		{"cut at 256 bytes", strings.Repeat("a", 300), strings.Repeat("a", 256) + "…"},
		{"cut before a rune that straddles byte 256", "x" + strings.Repeat("é", 200), "x" + strings.Repeat("é", 127) + "…"},
	} {
		m := pushenvelope.Identify(http.Header{"X-Goog-Pubsub-Message-Id": {tc.id}}, nil)
		if m.ID != tc.want {
			t.Errorf("%s: ID = %q (%d bytes), want %q", tc.name, m.ID, len(m.ID), tc.want)
		}
	}
}

func FuzzIdentify(f *testing.F) {
	f.Add("", `{"message":{"messageId":"1"}}`)
	f.Add("application/cloudevents+json", `{"id":"1","data":{"message":{"messageId":2}}}`)
	f.Fuzz(func(t *testing.T, ct, body string) {
		m := pushenvelope.Identify(http.Header{"Content-Type": {ct}}, []byte(body))
		if !utf8.ValidString(m.ID) || !utf8.ValidString(m.Subscription) || !utf8.ValidString(m.Source) {
			t.Errorf("invalid UTF-8 in %+v", m)
		}
	})
}
