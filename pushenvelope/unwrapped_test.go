package pushenvelope_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/pushenvelope"
)

func TestParseUnwrappedAttributes(t *testing.T) {
	h := http.Header{}
	for k, v := range map[string]string{
		"X-Goog-Pubsub-Message-Id":      "77",
		"Authorization":                 "Bearer secret",
		"Content-Type":                  "text/plain",
		"Content-Length":                "5",
		"User-Agent":                    "APIs-Google",
		"Traceparent":                   "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"X-Cloud-Trace-Context":         "0af7651916cd43dd8448eb211c80319c/1;o=1",
		"X-Forwarded-For":               "66.102.6.12",
		"X-Goog-Iap-Jwt-Assertion":      "jwt",
		"X-Goog-Pubsub-Future-Metadata": "x",
		// What proxies, load balancers, CDNs and tracing add on the way.
		"Via":                   "1.1 google",
		"Forwarded":             "for=66.102.6.12",
		"X-Real-Ip":             "66.102.6.12",
		"True-Client-Ip":        "66.102.6.12",
		"X-Amzn-Trace-Id":       "Root=1-5759e988-bd862e3fe1be46a994272793",
		"B3":                    "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1",
		"X-B3-Traceid":          "80f198ee56343ba864fe8b2a57d3eff7",
		"Baggage":               "userId=alice",
		"Sentry-Trace":          "771a43a4192642f0b136d5159a501700-0",
		"Uber-Trace-Id":         "5f8e:1:0:1",
		"X-Datadog-Trace-Id":    "123",
		"X-Envoy-Attempt-Count": "2",
		"Cdn-Loop":              "cloudflare",
		"Cf-Ray":                "7d1",
		"X-Amz-Cf-Id":           "abc",
		"X-Request-Start":       "t=1",
		"Proxy-Connection":      "keep-alive",
		"Content-Language":      "en",
		"Content-Md5":           "Q2hlY2sgSW50ZWdyaXR5IQ==",
		"Accept-Charset":        "utf-8",
		"Order_id":              "A-1",   // how net/http stores an attribute "order_id"
		"Eventtype":             "PAID",  // and "eventType": the case is gone
		"tenant":                "t-9",   // a map built by hand keeps its spelling
		"Empty":                 "",      // an empty attribute is still an attribute
		"Region":                "eu-w1", // first value wins
		"Accepted":              "yes",   // named like a header's prefix, not like a header
	} {
		h[k] = []string{v}
	}
	h["Region"] = append(h["Region"], "us-c1")
	m, err := pushenvelope.Parse(h, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"order_id": "A-1", "eventtype": "PAID", "tenant": "t-9", "empty": "", "region": "eu-w1", "accepted": "yes"}
	if diff := cmp.Diff(want, m.Attributes); diff != "" {
		t.Errorf("Attributes must hold the attribute headers only, lowercased (-want +got):\n%s", diff)
	}
}

func TestParseUnwrappedHeaders(t *testing.T) {
	tests := []struct {
		name    string
		header  map[string]string
		want    *pushenvelope.Message
		wantErr string
	}{
		{
			name:   "id only",
			header: map[string]string{"X-Goog-Pubsub-Message-Id": "1"},
			want:   &pushenvelope.Message{ID: "1", Data: []byte("d"), Attributes: map[string]string{}, Form: pushenvelope.Unwrapped},
		},
		{
			name:   "empty id is still unwrapped",
			header: map[string]string{"X-Goog-Pubsub-Message-Id": ""},
			want:   &pushenvelope.Message{Data: []byte("d"), Attributes: map[string]string{}, Form: pushenvelope.Unwrapped},
		},
		{
			name: "the pubsub ordering key wins over the short one",
			header: map[string]string{
				"X-Goog-Pubsub-Message-Id": "1", "X-Goog-Pubsub-Ordering-Key": "a", "X-Goog-Ordering-Key": "b",
			},
			want: &pushenvelope.Message{ID: "1", Data: []byte("d"), OrderingKey: "a", Attributes: map[string]string{}, Form: pushenvelope.Unwrapped},
		},
		{
			name:    "bad publish time",
			header:  map[string]string{"X-Goog-Pubsub-Message-Id": "1", "X-Goog-Pubsub-Publish-Time": "yesterday"},
			wantErr: `X-Goog-Pubsub-Publish-Time "yesterday" is not an RFC 3339 time`,
		},
		{
			name:   "delivery attempt zero",
			header: map[string]string{"X-Goog-Pubsub-Message-Id": "1", "X-Goog-Pubsub-Delivery-Attempt": "0"},
			want:   &pushenvelope.Message{ID: "1", Data: []byte("d"), Attributes: map[string]string{}, Form: pushenvelope.Unwrapped},
		},
		{
			name:    "bad delivery attempt",
			header:  map[string]string{"X-Goog-Pubsub-Message-Id": "1", "X-Goog-Pubsub-Delivery-Attempt": "-2"},
			wantErr: `X-Goog-Pubsub-Delivery-Attempt "-2" is not a count`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, err := pushenvelope.Parse(h, []byte("d"))
			checkInvariants(t, got, err)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %v, want ErrNotPush saying %q", err, tt.wantErr)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A body that is the wrapped envelope of the header's message except for a
// field encoding/json refuses is no envelope: it is the message's raw data.
// encoding/json decodes the rest of it regardless, messageId included.
func TestParseUnwrappedInvalidEnvelopeIsData(t *testing.T) {
	body := []byte(`{"message":{"messageId":"1"},"deliveryAttempt":"2"}`)
	got, err := pushenvelope.Parse(http.Header{"X-Goog-Pubsub-Message-Id": {"1"}}, body)
	checkInvariants(t, got, err)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &pushenvelope.Message{ID: "1", Data: body, Attributes: map[string]string{}, Form: pushenvelope.Unwrapped}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
}

func TestParseWithoutMetadataIsNotPush(t *testing.T) {
	// Unwrapped without write metadata: raw data and nothing that names a
	// message. It must not be mistaken for a delivery.
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"APIs-Google"}}
	m, err := pushenvelope.Parse(h, []byte(`{"order_id":"A-1042"}`))
	checkInvariants(t, m, err)
	if err == nil || !strings.Contains(err.Error(), "body has no message object") {
		t.Fatalf("Parse = %v, want ErrNotPush saying the body has no message object", err)
	}
}

// FuzzParseUnwrapped fuzzes the unwrapped decoder: the message id header is
// always set, so only a body that is a wrapped envelope of that same message
// may decode as anything but Unwrapped.
func FuzzParseUnwrapped(f *testing.F) {
	for _, fx := range allFixtures(f) {
		if strings.HasPrefix(fx.name, "unwrapped") {
			f.Add(fx.body, fx.header.Get("X-Goog-Pubsub-Message-Id"), fx.header.Get("X-Goog-Pubsub-Publish-Time"),
				fx.header.Get("X-Goog-Pubsub-Ordering-Key"), fx.header.Get("X-Goog-Pubsub-Delivery-Attempt"), "event", "order.created")
		}
	}
	f.Add([]byte(`{"message":{"messageId":"1"}}`), "1", "", "", "", "", "")
	// Attributes named like the headers that select a CloudEvent form: the
	// message id header must still win.
	f.Add([]byte(`{"order_id":"A-1"}`), "2", "", "", "", "ce-specversion", "1.0")
	f.Add([]byte(`{"message":{"data":"eA=="}}`), "3", "", "", "", "Ce-Specversion", "1.0")
	f.Add([]byte(`{"specversion":"1.0","type":"x","id":"4"}`), "4", "", "", "", "Content-Type", "application/cloudevents+json")
	f.Add([]byte(`{"message":{"messageId":"5"}}`), "5", "", "", "", "content-type", "application/CloudEvents+JSON; charset=utf-8")
	f.Fuzz(func(t *testing.T, body []byte, id, publishTime, orderingKey, attempt, attrName, attrValue string) {
		h := http.Header{}
		h.Set("X-Goog-Pubsub-Message-Id", id)
		for k, v := range map[string]string{
			"X-Goog-Pubsub-Publish-Time": publishTime, "X-Goog-Pubsub-Ordering-Key": orderingKey,
			"X-Goog-Pubsub-Delivery-Attempt": attempt, attrName: attrValue,
		} {
			if k != "" && v != "" {
				h.Add(k, v)
			}
		}
		m, err := pushenvelope.Parse(h, body)
		checkInvariants(t, m, err)
		if err != nil {
			return
		}
		switch {
		case m.Form == pushenvelope.Wrapped && m.ID != h.Get("X-Goog-Pubsub-Message-Id"):
			t.Fatalf("decoded as wrapped with id %q under the id header %q", m.ID, id)
		case m.Form != pushenvelope.Wrapped && m.Form != pushenvelope.Unwrapped:
			t.Fatalf("decoded as %v with the message id header set", m.Form)
		case m.Form == pushenvelope.Unwrapped && string(m.Data) != string(body):
			t.Fatal("unwrapped Data must be the body")
		}
	})
}
