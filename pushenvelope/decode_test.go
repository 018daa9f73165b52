package pushenvelope_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/pushenvelope"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

const (
	orderJSON   = `{"order_id":"A-1042","amount_cents":12900,"currency":"EUR"}`
	invoiceJSON = `{"invoice":"INV-311","total":"129.00"}`
	ordersSub   = "projects/acme-orders/subscriptions/orders-push"
	unwrapSub   = "projects/acme-orders/subscriptions/orders-unwrapped"
	eventarcSub = "projects/acme-billing/subscriptions/eventarc-us-central1-invoices-trigger-sub-512"
	topicSource = "//pubsub.googleapis.com/projects/acme-billing/topics/invoices"
)

// fixtureCases gives, for every file in testdata/push, the Message it decodes
// to or a substring of the reason it is rejected with.
var fixtureCases = map[string]struct {
	want    *pushenvelope.Message
	wantErr string
}{
	"wrapped-camelcase.http": {want: &pushenvelope.Message{
		ID: "11806521549917423", Data: []byte(orderJSON),
		Attributes:  map[string]string{"event": "order.created", "order_id": "A-1042"},
		PublishTime: at("2024-11-05T14:03:21.481Z"), Subscription: ordersSub, Form: pushenvelope.Wrapped,
	}},
	"wrapped-snakecase.http": {want: &pushenvelope.Message{
		ID: "11806521549917424", Data: []byte(orderJSON), Attributes: map[string]string{"event": "order.created"},
		PublishTime: at("2024-11-05T14:03:22.000123456Z"), OrderingKey: "customer-77",
		Subscription: ordersSub, DeliveryAttempt: 2, Form: pushenvelope.Wrapped,
	}},
	"wrapped-both-spellings.http": {want: &pushenvelope.Message{
		ID: "11806521549917425", Data: []byte(`{"order_id":"A-1043"}`), Attributes: map[string]string{"event": "order.paid"},
		PublishTime: at("2024-11-05T14:03:23.5Z"), Subscription: ordersSub, Form: pushenvelope.Wrapped,
	}},
	"wrapped-ordering-attempt.http": {want: &pushenvelope.Message{
		ID: "9120004431", Data: []byte("shipment S-88 dispatched"), Attributes: map[string]string{"carrier": "dhl"},
		PublishTime: at("2025-02-17T08:00:00.123456789Z"), OrderingKey: "shipment-S-88",
		Subscription: "projects/acme-logistics/subscriptions/shipments-push", DeliveryAttempt: 5, Form: pushenvelope.Wrapped,
	}},
	"wrapped-empty-data.http": {want: &pushenvelope.Message{
		ID: "9120004432", Attributes: map[string]string{}, PublishTime: at("2025-02-17T08:00:01Z"),
		Subscription: "projects/acme-logistics/subscriptions/shipments-push", Form: pushenvelope.Wrapped,
	}},
	"wrapped-attributes-only.http": {want: &pushenvelope.Message{
		ID: "7654321098765",
		Attributes: map[string]string{
			"objectId": "invoices/2025/INV-311.pdf", "eventType": "OBJECT_FINALIZE", "bucketId": "acme-invoices",
		},
		PublishTime: at("2025-03-01T10:15:00.250Z"), Subscription: "projects/acme-billing/subscriptions/gcs-notify",
		Form: pushenvelope.Wrapped,
	}},
	"wrapped-escaped-slashes.http": {want: &pushenvelope.Message{
		ID: "55501", Data: []byte{0xfb, 0xff, 0xbf, 0x3f, 0xfe, 0xff}, Attributes: map[string]string{"path": "/var/spool/in"},
		PublishTime: at("2025-04-09T12:00:00Z"), Subscription: "projects/acme-io/subscriptions/raw-push",
		Form: pushenvelope.Wrapped,
	}},
	"wrapped-unicode-attributes.http": {want: &pushenvelope.Message{
		ID: "55502", Data: []byte("grüße"),
		Attributes:  map[string]string{"città": "Zürich", "名前": "山田", "emoji": "📦 paket", "rtl": "שלום"},
		PublishTime: at("2025-04-09T12:00:01Z"), Subscription: "projects/acme-io/subscriptions/intl-push",
		Form: pushenvelope.Wrapped,
	}},
	"wrapped-missing-id.http": {want: &pushenvelope.Message{
		Data: []byte("no id here"), Attributes: map[string]string{}, PublishTime: at("2025-04-09T12:00:02Z"),
		Subscription: "projects/acme-io/subscriptions/raw-push", Form: pushenvelope.Wrapped,
	}},
	"wrapped-with-id-header.http": {want: &pushenvelope.Message{
		ID: "11806521549917426", Data: []byte(orderJSON), Attributes: map[string]string{},
		PublishTime: at("2024-11-05T14:03:25Z"), Subscription: ordersSub, Form: pushenvelope.Wrapped,
	}},
	"unwrapped.http": {want: &pushenvelope.Message{
		ID: "13244001928374650", Data: []byte(orderJSON),
		Attributes:  map[string]string{"event": "order.created", "order_id": "A-1042"},
		PublishTime: at("2024-11-05T14:03:21.481Z"), OrderingKey: "customer-77", Subscription: unwrapSub,
		Form: pushenvelope.Unwrapped,
	}},
	"unwrapped-goog-ordering-key.http": {want: &pushenvelope.Message{
		ID: "13244001928374651", Data: []byte("plain text payload"), Attributes: map[string]string{},
		PublishTime: at("2024-11-05T14:03:22Z"), OrderingKey: "customer-78", Subscription: unwrapSub,
		DeliveryAttempt: 3, Form: pushenvelope.Unwrapped,
	}},
	"unwrapped-empty-body.http": {want: &pushenvelope.Message{
		ID: "13244001928374652", Attributes: map[string]string{"kind": "heartbeat"},
		PublishTime: at("2024-11-05T14:03:23Z"), Subscription: unwrapSub, Form: pushenvelope.Unwrapped,
	}},
	"unwrapped-envelope-data.http": {want: &pushenvelope.Message{
		ID:         "13244001928374653",
		Data:       []byte(`{"message": {"data": "aW5uZXI=", "messageId": "999"}, "subscription": "projects/other/subscriptions/relay"}`),
		Attributes: map[string]string{}, PublishTime: at("2024-11-05T14:03:24Z"),
		Subscription: "projects/acme-orders/subscriptions/relay-unwrapped", Form: pushenvelope.Unwrapped,
	}},
	// An attribute named like a CloudEvents header stays an attribute: the
	// Pub/Sub metadata header decides the form.
	"unwrapped-ce-attributes.http": {want: &pushenvelope.Message{
		ID: "13244001928374654", Data: []byte(`{"order_id":"A-1044","amount_cents":4500,"currency":"EUR"}`),
		Attributes: map[string]string{
			"ce-specversion": "1.0", "ce-type": "com.acme.order.created", "order_id": "A-1044",
		},
		PublishTime: at("2024-11-05T14:03:25Z"), Subscription: unwrapSub, Form: pushenvelope.Unwrapped,
	}},
	// So does a Content-Type attribute that names the structured CloudEvent
	// media type: the data is whatever the publisher sent.
	"unwrapped-cloudevents-content-type.http": {want: &pushenvelope.Message{
		ID:         "13244001928374655",
		Data:       []byte(`{"specversion":"1.0","type":"com.acme.order.created","source":"/erp","id":"e-17","data":{"order_id":"A-1045"}}`),
		Attributes: map[string]string{"source": "erp"}, PublishTime: at("2024-11-05T14:03:26Z"),
		Subscription: unwrapSub, Form: pushenvelope.Unwrapped,
	}},
	"cloudevent-binary.http": {want: &pushenvelope.Message{
		ID: "8374650912345", Data: []byte(invoiceJSON), Attributes: map[string]string{"tenant": "t-9"},
		PublishTime: at("2025-03-01T10:15:00.25Z"), Subscription: eventarcSub, Source: topicSource,
		Form: pushenvelope.CloudEventBinary,
	}},
	"cloudevent-binary-no-inner-id.http": {want: &pushenvelope.Message{
		ID: "8374650912346", Data: []byte(invoiceJSON), Attributes: map[string]string{},
		PublishTime: at("2025-03-01T10:15:01Z"), Subscription: eventarcSub, Source: topicSource,
		Form: pushenvelope.CloudEventBinary,
	}},
	"cloudevent-structured.http": {want: &pushenvelope.Message{
		ID: "8374650912347", Data: []byte(invoiceJSON), Attributes: map[string]string{"tenant": "t-9"},
		PublishTime: at("2025-03-01T10:15:02Z"), Subscription: eventarcSub, Source: topicSource,
		Form: pushenvelope.CloudEventStructured,
	}},
	"cloudevent-structured-base64.http": {want: &pushenvelope.Message{
		ID: "8374650912348", Data: []byte(invoiceJSON), Attributes: map[string]string{},
		PublishTime: at("2025-03-01T10:15:03Z"), OrderingKey: "tenant-t-9", Subscription: eventarcSub,
		Source: topicSource, Form: pushenvelope.CloudEventStructured,
	}},
	"invalid-not-json.http":             {wantErr: "body is not JSON"},
	"invalid-empty-body.http":           {wantErr: "empty body"},
	"invalid-no-message.http":           {wantErr: "body has no message object"},
	"invalid-null-message.http":         {wantErr: "message is null"},
	"invalid-bad-base64.http":           {wantErr: "message.data is not base64"},
	"invalid-attribute-not-string.http": {wantErr: "message.attributes"},
	"invalid-ids-disagree.http":         {wantErr: "message.messageId and message.message_id disagree"},
	"invalid-bad-publish-time.http":     {wantErr: `message.publishTime "05/11/2024 14:03" is not an RFC 3339 time`},
	"invalid-wrong-cloudevent-type.http": {
		wantErr: `CloudEvent type "google.cloud.storage.object.v1.finalized" is not google.cloud.pubsub.topic.v1.messagePublished`,
	},
	"invalid-structured-no-data.http": {wantErr: "CloudEvent has no data"},
	"invalid-json-array.http":         {wantErr: "body is a JSON array, not an object"},
}

func TestDecodeFixtures(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range allFixtures(t) {
		seen[f.name] = true
		t.Run(strings.TrimSuffix(f.name, ".http"), func(t *testing.T) {
			tc, ok := fixtureCases[f.name]
			if !ok {
				t.Fatalf("fixture %s has no expected result in fixtureCases", f.name)
			}
			got, err := pushenvelope.Decode(f.request(), 0)
			checkInvariants(t, got, err)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode error = %v, want ErrNotPush saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for name := range fixtureCases {
		if !seen[name] {
			t.Errorf("fixtureCases names %s, which is not in %s", name, fixtureDir)
		}
	}
}

func TestDecodeRestoresBody(t *testing.T) {
	f := readFixture(t, "wrapped-camelcase.http")
	var got []byte
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		if got, err = io.ReadAll(r.Body); err != nil {
			t.Errorf("next handler reading the body: %v", err)
		}
		if r.ContentLength != int64(len(f.body)) {
			t.Errorf("ContentLength = %d, want %d", r.ContentLength, len(f.body))
		}
		again, err := r.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(again); !bytes.Equal(b, f.body) {
			t.Error("GetBody must return the same bytes again")
		}
	})
	mw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := pushenvelope.Decode(r, 0); err != nil {
			t.Fatalf("Decode: %v", err)
		}
		next.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mw)
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Post(srv.URL, "application/json", bytes.NewReader(f.body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !bytes.Equal(got, f.body) {
		t.Fatalf("the next handler read %d bytes, want the %d bytes sent", len(got), len(f.body))
	}
}

// unreadable fails the test if anything reads it.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("Decode read a body whose Content-Length is over the limit")
	return 0, io.EOF
}

func TestDecodeTooLarge(t *testing.T) {
	body := []byte(`{"message":{"data":"aGVsbG8=","messageId":"1"}}`) // 47 bytes
	n := int64(len(body))

	t.Run("content-length", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "/", unreadable{t})
		r.ContentLength = n
		_, err := pushenvelope.Decode(r, n-1)
		var tooLarge *pushenvelope.TooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Limit != n-1 {
			t.Fatalf("Decode = %v, want *TooLargeError{Limit: %d}", err, n-1)
		}
		if want := "pushenvelope: body larger than 46 bytes"; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err, want)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(bytes.NewReader(body))) // hides the length
		r.ContentLength = -1
		_, err := pushenvelope.Decode(r, n-1)
		var tooLarge *pushenvelope.TooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Limit != n-1 {
			t.Fatalf("Decode = %v, want *TooLargeError{Limit: %d}", err, n-1)
		}
	})
	t.Run("exactly-the-limit", func(t *testing.T) {
		for _, cl := range []int64{n, -1} {
			r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(bytes.NewReader(body)))
			r.ContentLength = cl
			if _, err := pushenvelope.Decode(r, n); err != nil {
				t.Fatalf("Content-Length %d: a body of exactly the limit must decode, got %v", cl, err)
			}
		}
	})
	t.Run("outer-max-bytes-reader", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.ContentLength = -1
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 10)
		_, err := pushenvelope.Decode(r, 0)
		var tooLarge *pushenvelope.TooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Limit != 10 {
			t.Fatalf("Decode = %v, want *TooLargeError{Limit: 10} from the caller's MaxBytesReader", err)
		}
	})
	t.Run("content-length-understated", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.ContentLength = 2 // a client-built request may lie; the limit still holds
		_, err := pushenvelope.Decode(r, n-1)
		var tooLarge *pushenvelope.TooLargeError
		if !errors.As(err, &tooLarge) {
			t.Fatalf("Decode = %v, want *TooLargeError", err)
		}
	})
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestDecodeReadError(t *testing.T) {
	cause := errors.New("connection reset")
	r := httptest.NewRequest(http.MethodPost, "/", failingReader{cause})
	r.ContentLength = -1
	_, err := pushenvelope.Decode(r, 0)
	if !errors.Is(err, cause) {
		t.Fatalf("Decode = %v, want the read error wrapped", err)
	}
	if errors.Is(err, pushenvelope.ErrNotPush) {
		t.Fatal("a read error is not ErrNotPush: the request may have been a delivery")
	}
}

// countingReader serves n bytes of a JSON-ish body and counts what was read.
type countingReader struct{ left, read int }

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.left)
	c.left -= n
	c.read += n
	return n, nil
}

// Decode reads at most one byte past the limit, however large the body:
// a huge delivery costs no more than the limit.
func TestDecodeReadsAtMostLimitPlusOne(t *testing.T) {
	const limit = 1000
	body := &countingReader{left: 100_000}
	r := httptest.NewRequest(http.MethodPost, "/", body)
	r.ContentLength = -1
	var tooLarge *pushenvelope.TooLargeError
	if _, err := pushenvelope.Decode(r, limit); !errors.As(err, &tooLarge) {
		t.Fatalf("Decode = %v, want *TooLargeError", err)
	}
	if body.read > limit+1 {
		t.Errorf("Decode read %d bytes of the body, want at most %d", body.read, limit+1)
	}
}

// An empty body announced as such (Content-Length: 0) is no delivery, and
// no panic.
func TestDecodeEmptyBody(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(nil))
	r.ContentLength = 0
	if _, err := pushenvelope.Decode(r, 0); !errors.Is(err, pushenvelope.ErrNotPush) {
		t.Fatalf("Decode = %v, want ErrNotPush", err)
	}
}

// Pub/Sub's message id header present without a value (a header map built
// by hand) is read as an empty id, as an empty value is, never indexed past
// its end.
func TestParseMessageIDHeaderWithoutValue(t *testing.T) {
	m, err := pushenvelope.Parse(http.Header{"X-Goog-Pubsub-Message-Id": {}}, []byte("data"))
	if err != nil || m.ID != "" || string(m.Data) != "data" {
		t.Fatalf("Parse = %+v, %v; want the unwrapped message with an empty id", m, err)
	}
}

func TestDecodeNilBody(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body = nil
	r.Header.Set("X-Goog-Pubsub-Message-Id", "42")
	m, err := pushenvelope.Decode(r, 0)
	if err != nil || m.ID != "42" || m.Data != nil {
		t.Fatalf("Decode = %+v, %v; want an attribute-only unwrapped message 42", m, err)
	}
	if b, _ := io.ReadAll(r.Body); len(b) != 0 {
		t.Fatal("the restored body of an empty request must be empty")
	}
}

// FuzzParse feeds any header block and body to Parse; the seeds are the
// fixtures, so every form's decoder is reached.
func FuzzParse(f *testing.F) {
	for _, fx := range allFixtures(f) {
		f.Add(fx.head, fx.body)
	}
	f.Fuzz(func(t *testing.T, headers string, body []byte) {
		m, err := pushenvelope.Parse(parseHeaderBlock(headers), body)
		checkInvariants(t, m, err)
	})
}
