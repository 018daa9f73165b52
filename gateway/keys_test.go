package gateway_test

import (
	"net/http"
	"testing"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// A messageId is unique within its topic only. Two topics' routes on one
// store that keep the default key meet one messageId of two messages as a
// duplicate; a prefix per topic keeps them apart, and one message through
// two subscriptions of its topic still runs once.
func TestMessageIDKeyIsPerTopic(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	topic := func(name string) gateway.KeyFunc {
		return func(m *pushenvelope.Message) (string, error) {
			id, err := gateway.KeyFromMessageID(m)
			return name + ":" + id, err
		}
	}
	orders, invoices := &counting{}, &counting{}
	wantStatus(t, deliver(t, f.g.Idempotent(orders), push("42", nil, "order")), http.StatusOK, "orders, message 42")
	wantStatus(t, deliver(t, f.g.Idempotent(invoices), push("42", nil, "invoice")), http.StatusNoContent,
		"invoices, message 42, under the default key: the orders' record")

	ordersRoute := f.g.Route(&gateway.RouteOptions{Key: topic("orders")})
	invoicesRoute := f.g.Route(&gateway.RouteOptions{Key: topic("invoices")})
	wantStatus(t, deliver(t, ordersRoute.Idempotent(orders), push("43", nil, "order")), http.StatusOK, "orders, message 43")
	wantStatus(t, deliver(t, invoicesRoute.Idempotent(invoices), push("43", nil, "invoice")), http.StatusOK, "invoices, message 43, prefixed")
	wantStatus(t, deliver(t, ordersRoute.Idempotent(orders), push("43", nil, "order")), http.StatusNoContent, "orders, message 43 through a second subscription")
	if o, i := orders.runs.Load(), invoices.runs.Load(); o != 2 || i != 1 {
		t.Errorf("orders ran %d times, invoices %d; want 2 and 1", o, i)
	}
}

// KeyFromAttribute keys on the attribute's value, prefixed with its name;
// a message without the attribute, or with it empty, has no key, so that
// the gateway fails closed instead of filing every such message under one
// key "order_id:".
func TestKeyFromAttribute(t *testing.T) {
	key := gateway.KeyFromAttribute("order_id")
	for _, tc := range []struct {
		name  string
		attrs map[string]string
		want  string // "" for no key
	}{
		{"present", map[string]string{"order_id": "7", "other": "x"}, "order_id:7"},
		{"absent", map[string]string{"other": "x"}, ""},
		{"empty", map[string]string{"order_id": ""}, ""},
		{"no attributes", nil, ""},
	} {
		got, err := key(&pushenvelope.Message{ID: "m-1", Attributes: tc.attrs})
		if tc.want == "" && (err == nil || got != "") || tc.want != "" && (err != nil || got != tc.want) {
			t.Errorf("%s: KeyFromAttribute = %q, %v; want %q and an error exactly when there is no key", tc.name, got, err, tc.want)
		}
	}
}
