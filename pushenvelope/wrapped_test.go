package pushenvelope_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/pushenvelope"
)

func TestParseWrappedReasons(t *testing.T) {
	tests := []struct {
		name, body, wantErr string
	}{
		{"message is a string", `{"message":"hi"}`, "message is a JSON string, want object"},
		{"attribute is a bool", `{"message":{"attributes":{"ok":true}}}`, "is a JSON bool, want string"},
		{"id is a number", `{"message":{"messageId":7}}`, "message.messageId is a JSON number, want string"},
		{"data is a number", `{"message":{"data":7}}`, "message.data is a JSON number, want a base64 string"},
		{"data is an object", `{"message":{"data":{}}}`, "message.data is a JSON object, want a base64 string"},
		{"data is an array", `{"message":{"data":[1]}}`, "message.data is a JSON array, want a base64 string"},
		{"data is a bool", `{"message":{"data":false}}`, "message.data is a JSON bool, want a base64 string"},
		{"data without padding", `{"message":{"data":"aGk"}}`, "message.data is not base64"},
		{"url-safe base64", `{"message":{"data":"-_8="}}`, "message.data is not base64"},
		{"attempt is fractional", `{"message":{},"deliveryAttempt":1.5}`, "deliveryAttempt is a JSON number 1.5, want integer"},
		{"attempt is negative", `{"message":{},"deliveryAttempt":-1}`, "deliveryAttempt is negative"},
		{"attempts disagree", `{"message":{},"deliveryAttempt":2,"delivery_attempt":3}`, "deliveryAttempt and delivery_attempt disagree"},
		{"ordering keys disagree", `{"message":{"orderingKey":"a","ordering_key":"b"}}`, "message.orderingKey and message.ordering_key disagree"},
		{"times disagree", `{"message":{"publishTime":"2025-01-01T00:00:00Z","publish_time":"2025-01-01T00:00:01Z"}}`, "disagree"},
		{"trailing garbage", `{"message":{}} x`, "body is not JSON"},
		{"truncated", `{"message":{"data":"aGk=`, "body is not JSON"},
		{"JSON string", `"message"`, "body is a JSON string, not an object"},
		{"whitespace only", " \n", "body is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := pushenvelope.Parse(http.Header{}, []byte(tt.body))
			checkInvariants(t, m, err)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse(%s) = %v, want ErrNotPush saying %q", tt.body, err, tt.wantErr)
			}
		})
	}
}

func TestParseWrappedLenient(t *testing.T) {
	// What the format allows and a strict reading might refuse.
	tests := []struct {
		name, body string
		want       pushenvelope.Message
	}{
		{"empty message object", `{"message":{}}`, pushenvelope.Message{Attributes: map[string]string{}, Form: pushenvelope.Wrapped}},
		{"null fields", `{"message":{"data":null,"attributes":null,"messageId":"1"},"subscription":null}`,
			pushenvelope.Message{ID: "1", Attributes: map[string]string{}, Form: pushenvelope.Wrapped}},
		{"offset publish time is kept in UTC", `{"message":{"publishTime":"2025-01-01T02:00:00.5+02:00"}}`,
			pushenvelope.Message{PublishTime: time.Date(2025, 1, 1, 0, 0, 0, 5e8, time.UTC), Attributes: map[string]string{}, Form: pushenvelope.Wrapped}},
		{"same value in both spellings", `{"message":{"messageId":"9","message_id":"9"},"deliveryAttempt":4,"delivery_attempt":4}`,
			pushenvelope.Message{ID: "9", DeliveryAttempt: 4, Attributes: map[string]string{}, Form: pushenvelope.Wrapped}},
		{"empty data, decoded by encoding/json", `{"message":{"data":"","extra":1}}`,
			pushenvelope.Message{Attributes: map[string]string{}, Form: pushenvelope.Wrapped}},
		{"data starting with an escape", `{"message":{"data":"\/w=="}}`,
			pushenvelope.Message{Data: []byte{0xff}, Attributes: map[string]string{}, Form: pushenvelope.Wrapped}},
		{"leading whitespace", " \r\n\t{\"message\":{\"messageId\":\"2\"}}",
			pushenvelope.Message{ID: "2", Attributes: map[string]string{}, Form: pushenvelope.Wrapped}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pushenvelope.Parse(http.Header{}, []byte(tt.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
			if got.PublishTime.Location() != time.UTC {
				t.Errorf("PublishTime location = %v, want UTC", got.PublishTime.Location())
			}
		})
	}
}

// published rebuilds the wrapped body a Message came from.
func published(m *pushenvelope.Message) pushenvelope.MessagePublishedData {
	return pushenvelope.MessagePublishedData{
		Message: pushenvelope.PubsubMessage{
			Data: m.Data, Attributes: m.Attributes, MessageID: m.ID,
			PublishTime: m.PublishTime, OrderingKey: m.OrderingKey,
		},
		Subscription:    m.Subscription,
		DeliveryAttempt: m.DeliveryAttempt,
	}
}

// FuzzParseWrapped fuzzes the wrapped decoder. Beyond not panicking, a body
// that decodes must survive a round trip: marshal what was decoded, decode
// again, and get the same Message.
func FuzzParseWrapped(f *testing.F) {
	for _, fx := range allFixtures(f) {
		if strings.HasPrefix(fx.name, "wrapped-") || strings.HasPrefix(fx.name, "invalid-") {
			f.Add(fx.body)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := pushenvelope.Parse(http.Header{}, body)
		checkInvariants(t, m, err)
		if err != nil {
			return
		}
		if m.Form != pushenvelope.Wrapped {
			t.Fatalf("a body without headers decoded as %v, want wrapped", m.Form)
		}
		if y := m.PublishTime.Year(); y < 0 || y > 9999 {
			return // an offset moved the UTC time out of RFC 3339's range
		}
		again, err := json.Marshal(published(m))
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		m2, err := pushenvelope.Parse(http.Header{}, again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if diff := cmp.Diff(m, m2); diff != "" {
			t.Fatalf("round trip changed the Message (-first +second):\n%s", diff)
		}
	})
}

// benchBody is a wrapped body as Pub/Sub sends it (both spellings) with
// dataLen bytes of data.
func benchBody(dataLen int) []byte {
	data := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), dataLen))
	return fmt.Appendf(nil, `{"message":{"attributes":{"event":"order.created","order_id":"A-1042"},`+
		`"data":%q,"messageId":"11806521549917423","message_id":"11806521549917423",`+
		`"publishTime":"2024-11-05T14:03:21.481Z","publish_time":"2024-11-05T14:03:21.481Z"},`+
		`"subscription":"projects/acme-orders/subscriptions/orders-push"}`, data)
}

// baselinePush is what a handler without this package would decode into.
type baselinePush struct {
	Message struct {
		Data        []byte            `json:"data"`
		Attributes  map[string]string `json:"attributes"`
		MessageID   string            `json:"messageId"`
		PublishTime time.Time         `json:"publishTime"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}

// BenchmarkParseWrapped measures Parse on wrapped bodies; the Baseline
// variants decode the same bodies with encoding/json into baselinePush, the
// cost the HTTP middleware is compared with.
//
//	go test -run '^$' -bench ParseWrapped -benchmem ./pushenvelope/
func BenchmarkParseWrapped(b *testing.B) {
	for _, n := range []int{64, 4 << 10, 64 << 10} {
		body := benchBody(n)
		b.Run(fmt.Sprintf("Parse/data=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			h := http.Header{"Content-Type": {"application/json"}}
			for b.Loop() {
				if _, err := pushenvelope.Parse(h, body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("Baseline/data=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var p baselinePush
				if err := json.Unmarshal(body, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeWrapped adds reading and restoring the body to Parse.
func BenchmarkDecodeWrapped(b *testing.B) {
	body := benchBody(64)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if _, err := pushenvelope.Decode(r, 0); err != nil {
			b.Fatal(err)
		}
	}
}
