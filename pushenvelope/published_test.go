package pushenvelope_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/pushenvelope"
)

func TestMessagePublishedDataJSON(t *testing.T) {
	in := pushenvelope.MessagePublishedData{
		Message: pushenvelope.PubsubMessage{
			Data: []byte("hi"), Attributes: map[string]string{"k": "v"}, MessageID: "5",
			PublishTime: time.Date(2025, 5, 1, 12, 0, 0, 123456789, time.UTC), OrderingKey: "o",
		},
		Subscription: "projects/p/subscriptions/s", DeliveryAttempt: 2,
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"message":{"data":"aGk=","attributes":{"k":"v"},"messageId":"5",` +
		`"publishTime":"2025-05-01T12:00:00.123456789Z","orderingKey":"o"},` +
		`"subscription":"projects/p/subscriptions/s","deliveryAttempt":2}`
	if string(b) != want {
		t.Fatalf("Marshal = %s\nwant      %s", b, want)
	}
	var out pushenvelope.MessagePublishedData
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	snake := `{"message":{"data":"aGk=","attributes":{"k":"v"},"message_id":"5",` +
		`"publish_time":"2025-05-01T12:00:00.123456789Z","ordering_key":"o"},` +
		`"subscription":"projects/p/subscriptions/s","delivery_attempt":2}`
	out = pushenvelope.MessagePublishedData{}
	if err := json.Unmarshal([]byte(snake), &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("snake_case unmarshal (-want +got):\n%s", diff)
	}

	var msg pushenvelope.PubsubMessage
	if err := json.Unmarshal([]byte(`{"message_id":"5","data":"aGk="}`), &msg); err != nil || msg.MessageID != "5" || string(msg.Data) != "hi" {
		t.Errorf("PubsubMessage from snake_case = %+v, %v", msg, err)
	}
	out = pushenvelope.MessagePublishedData{}
	if err := json.Unmarshal([]byte(`{"message":{"data":""}}`), &out); err != nil {
		t.Fatal(err)
	}
	if out.Message.Data != nil || out.Message.Attributes == nil {
		t.Errorf("Unmarshal of an empty message = %#v; like Message, Data must be nil when empty and Attributes never nil", out.Message)
	}
	err = json.Unmarshal([]byte(`{"subscription":"s"}`), &out)
	if !errors.Is(err, pushenvelope.ErrNotPush) {
		t.Errorf("Unmarshal without a message = %v, want ErrNotPush", err)
	}
}
