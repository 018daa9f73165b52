package pushenvelope_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemgate/idemgate/pushenvelope"
)

func ExampleDecode() {
	// A wrapped push, as Pub/Sub sends it.
	body := `{"message":{"attributes":{"order_id":"A-1042"},"data":"eyJ0b3RhbCI6MTI5fQ==",` +
		`"messageId":"11806521549917423","message_id":"11806521549917423",` +
		`"publishTime":"2024-11-05T14:03:21.481Z","publish_time":"2024-11-05T14:03:21.481Z"},` +
		`"subscription":"projects/acme-orders/subscriptions/orders-push"}`
	r := httptest.NewRequest(http.MethodPost, "/push", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")

	m, err := pushenvelope.Decode(r, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Form, m.ID, m.Subscription)
	fmt.Println(string(m.Data), m.Attributes["order_id"], m.PublishTime.Format("15:04:05.000"))

	// The next handler still reads the body as sent.
	rest, _ := io.ReadAll(r.Body)
	fmt.Println(len(rest) == len(body))

	// Anything else is ErrNotPush with its reason.
	_, err = pushenvelope.Parse(http.Header{}, []byte(`{"order_id":"A-1042"}`))
	fmt.Println(err)
	// Output:
	// wrapped 11806521549917423 projects/acme-orders/subscriptions/orders-push
	// {"total":129} A-1042 14:03:21.481
	// true
	// pushenvelope: not a Pub/Sub push delivery: body has no message object
}
