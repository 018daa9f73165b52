package pushenvelope_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/pushenvelope"
)

func TestFromMessagePublishedData(t *testing.T) {
	data := []byte(`{"message":{"data":"aGk=","message_id":"","attributes":{"k":"v"}},"subscription":"projects/p/subscriptions/s"}`)
	got, err := pushenvelope.FromMessagePublishedData("ev-1", "//pubsub.googleapis.com/projects/p/topics/t", data)
	if err != nil {
		t.Fatal(err)
	}
	want := &pushenvelope.Message{
		ID: "ev-1", Data: []byte("hi"), Attributes: map[string]string{"k": "v"},
		Subscription: "projects/p/subscriptions/s", Source: "//pubsub.googleapis.com/projects/p/topics/t",
		Form: pushenvelope.CloudEventBinary,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the event id must stand in for a missing messageId (-want +got):\n%s", diff)
	}

	got, err = pushenvelope.FromMessagePublishedData("ev-1", "", []byte(`{"message":{"messageId":"m-1"}}`))
	if err != nil || got.ID != "m-1" {
		t.Errorf("FromMessagePublishedData = %+v, %v; the data's messageId must win over the event id", got, err)
	}
	_, err = pushenvelope.FromMessagePublishedData("ev-1", "", []byte(`{"bucket":"b"}`))
	if !errors.Is(err, pushenvelope.ErrNotPush) || !strings.Contains(err.Error(), "CloudEvent data has no message object") {
		t.Errorf("FromMessagePublishedData(storage data) = %v, want ErrNotPush", err)
	}
}

func TestParseCloudEventReasons(t *testing.T) {
	const typ = `"type":"google.cloud.pubsub.topic.v1.messagePublished"`
	structured := http.Header{"Content-Type": {"Application/CloudEvents+JSON ; charset=utf-8"}}
	binary := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Type": {pushenvelope.MessagePublishedType}, "Ce-Id": {"e"}, "Ce-Source": {"//s"}}
	without := func(name string) http.Header {
		h := binary.Clone()
		h.Del(name)
		return h
	}
	version := func(v string) http.Header {
		h := binary.Clone()
		h.Set("Ce-Specversion", v)
		return h
	}
	tests := []struct {
		name    string
		header  http.Header
		body    string
		wantErr string
	}{
		{"binary without type", http.Header{"Ce-Specversion": {"1.0"}}, `{"message":{}}`, `CloudEvent type "" is not`},
		{"binary empty body", binary, ``, "empty CloudEvent data"},
		{"binary without id", without("Ce-Id"), `{"message":{"messageId":"1"}}`, "CloudEvent has no id"},
		{"binary without source", without("Ce-Source"), `{"message":{"messageId":"1"}}`, "CloudEvent has no source"},
		{"binary spec 2.0", version("2.0"), `{"message":{"messageId":"1"}}`, `CloudEvent specversion "2.0" is not 1.0 (or 0.3)`},
		{"structured without id", structured, `{"specversion":"1.0","source":"//s",` + typ + `,"data":{"message":{}}}`, "CloudEvent has no id"},
		{"structured without source", structured, `{"specversion":"1.0","id":"e",` + typ + `,"data":{"message":{}}}`, "CloudEvent has no source"},
		{"structured spec 1.1", structured, `{"specversion":"1.1","id":"e","source":"//s",` + typ + `,"data":{"message":{}}}`, `CloudEvent specversion "1.1" is not`},
		{"binary data not JSON", binary, `hello`, "CloudEvent data is not JSON"},
		{"binary null message", binary, `{"message":null}`, "message is null"},
		{"structured not JSON", structured, `{`, "CloudEvent is not JSON"},
		{"structured no specversion", structured, `{` + typ + `,"data":{"message":{}}}`, "CloudEvent has no specversion"},
		{"structured wrong type", structured, `{"specversion":"1.0","type":"x.y","data":{"message":{}}}`, `CloudEvent type "x.y" is not`},
		{"structured both data forms", structured, `{"specversion":"1.0","id":"e","source":"//s",` + typ + `,"data":{"message":{}},"data_base64":"e30="}`, "both data and data_base64"},
		{"structured data is a string", structured, `{"specversion":"1.0","id":"e","source":"//s",` + typ + `,"data":"{}"}`, "data is a JSON string, want object"},
		{"structured data without message", structured, `{"specversion":"1.0","id":"e","source":"//s",` + typ + `,"data":{}}`, "CloudEvent data has no message object"},
		{"structured null message", structured, `{"specversion":"1.0","id":"e","source":"//s",` + typ + `,"data":{"message":null}}`, "data.message is null"},
		{"structured bad inner base64", structured, `{"specversion":"1.0","id":"e","source":"//s",` + typ + `,"data":{"message":{"data":"%%"}}}`, "data.message.data is not base64"},
		{"structured ids disagree", structured, `{"specversion":"1.0","id":"e","source":"//s",` + typ + `,"data":{"message":{"messageId":"1","message_id":"2"}}}`, "data.message.messageId and data.message.message_id disagree"},
		{"structured bad data_base64", structured, `{"specversion":"1.0","id":"e","source":"//s",` + typ + `,"data_base64":"%%"}`, "CloudEvent data_base64 is not base64"},
		{"structured data_base64 not JSON", structured, `{"specversion":"1.0","id":"e","source":"//s",` + typ + `,"data_base64":"aGk="}`, "CloudEvent data_base64 is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := pushenvelope.Parse(tt.header, []byte(tt.body))
			checkInvariants(t, m, err)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse = %v, want ErrNotPush saying %q", err, tt.wantErr)
			}
		})
	}
}

// The push path reads spec version 0.3 as functions-framework's SDK does:
// its required attributes are those of 1.0.
func TestParseCloudEventSpecVersions(t *testing.T) {
	for _, v := range []string{"1.0", "0.3"} {
		h := http.Header{"Ce-Specversion": {v}, "Ce-Type": {pushenvelope.MessagePublishedType}, "Ce-Id": {"e"}, "Ce-Source": {"//s"}}
		if m, err := pushenvelope.Parse(h, []byte(`{"message":{"messageId":"1"}}`)); err != nil || m.ID != "1" {
			t.Errorf("binary %s: Parse = %+v, %v; want message 1", v, m, err)
		}
	}
}

func TestParsePushHeaderWinsOverCloudEventHeaders(t *testing.T) {
	// An unwrapped push sends every attribute as a header, so CloudEvents
	// headers next to Pub/Sub's message id header are attributes: the
	// delivery is the unwrapped message "m-7", never a CloudEvent, whatever
	// the body looks like.
	binaryAttrs := http.Header{
		"Ce-Specversion": {"1.0"}, "Ce-Type": {pushenvelope.MessagePublishedType}, "Ce-Id": {"e-1"},
	}
	tests := []struct {
		name   string
		header http.Header
		body   string
	}{
		{"ce attributes, body a messagePublished data", binaryAttrs, `{"message":{"data":"aGk="}}`},
		{"ce attributes, body not JSON", binaryAttrs, `plain text`},
		{"ce attributes, empty body", binaryAttrs, ``},
		{"cloudevents content type, body a structured event", http.Header{"Content-Type": {"application/cloudevents+json"}},
			`{"specversion":"1.0","type":"` + pushenvelope.MessagePublishedType + `","id":"e-2","data":{"message":{"data":"aGk="}}}`},
		{"cloudevents content type, body not JSON", http.Header{"Content-Type": {"Application/CloudEvents+JSON; charset=utf-8"}}, `<xml/>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header.Clone()
			h.Set("X-Goog-Pubsub-Message-Id", "m-7")
			m, err := pushenvelope.Parse(h, []byte(tt.body))
			checkInvariants(t, m, err)
			if err != nil {
				t.Fatalf("Parse = %v; an unwrapped push with CloudEvents-like attributes must decode", err)
			}
			if m.Form != pushenvelope.Unwrapped || m.ID != "m-7" || string(m.Data) != tt.body {
				t.Fatalf("Parse = %+v; want the unwrapped message m-7 with the body as its data", m)
			}
			for k, vs := range tt.header {
				if name := strings.ToLower(k); strings.HasPrefix(name, "ce-") && m.Attributes[name] != vs[0] {
					t.Errorf("Attributes[%q] = %q, want %q: a ce-* header on an unwrapped push is an attribute", name, m.Attributes[name], vs[0])
				}
			}
		})
	}
}

// FuzzParseCloudEventBinary fuzzes the binary-mode decoder.
func FuzzParseCloudEventBinary(f *testing.F) {
	for _, fx := range allFixtures(f) {
		if fx.header.Get("Ce-Specversion") != "" {
			f.Add(fx.body, fx.header.Get("Ce-Type"), fx.header.Get("Ce-Id"), fx.header.Get("Ce-Source"))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, ceType, ceID, ceSource string) {
		h := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Type": {ceType}, "Ce-Id": {ceID}, "Ce-Source": {ceSource}}
		m, err := pushenvelope.Parse(h, body)
		checkInvariants(t, m, err)
		if err != nil {
			return
		}
		switch {
		case m.Form != pushenvelope.CloudEventBinary:
			t.Fatalf("Form = %v, want cloudevent-binary", m.Form)
		case ceType != pushenvelope.MessagePublishedType:
			t.Fatalf("decoded a CloudEvent of type %q", ceType)
		case m.Source != ceSource:
			t.Fatalf("Source = %q, want Ce-Source %q", m.Source, ceSource)
		case m.ID == "" && ceID != "":
			t.Fatal("the event id must stand in for a missing messageId")
		}
	})
}

// FuzzParseCloudEventStructured fuzzes the structured-mode decoder.
func FuzzParseCloudEventStructured(f *testing.F) {
	for _, fx := range allFixtures(f) {
		if strings.HasPrefix(fx.header.Get("Content-Type"), "application/cloudevents+json") {
			f.Add(fx.body)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h := http.Header{"Content-Type": {"application/cloudevents+json"}}
		m, err := pushenvelope.Parse(h, body)
		checkInvariants(t, m, err)
		if err == nil && m.Form != pushenvelope.CloudEventStructured {
			t.Fatalf("Form = %v, want cloudevent-structured", m.Form)
		}
	})
}
