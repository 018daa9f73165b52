package gateway_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
)

func TestFingerprintPayload(t *testing.T) {
	fp := func(data string, attrs map[string]string) []byte {
		t.Helper()
		b, err := gateway.FingerprintPayload(&pushenvelope.Message{ID: "ignored", Data: []byte(data), Attributes: attrs})
		if err != nil || len(b) != store.MaxFingerprintLen {
			t.Fatalf("FingerprintPayload = %x, %v; want 32 bytes", b, err)
		}
		return b
	}
	base := fp("order 1", map[string]string{"order_id": "7", "currency": "EUR"})
	same := map[string][]byte{
		"attributes in another order": fp("order 1", map[string]string{"currency": "EUR", "order_id": "7"}),
		"Google's own attributes":     fp("order 1", map[string]string{"order_id": "7", "currency": "EUR", "googclient_OpenTelemetrySpanContext": "00-abc"}),
	}
	for name, b := range same {
		if !bytes.Equal(b, base) {
			t.Errorf("%s: fingerprint changed", name)
		}
	}
	differ := map[string][]byte{
		"other data":                 fp("order 2", map[string]string{"order_id": "7", "currency": "EUR"}),
		"other attribute value":      fp("order 1", map[string]string{"order_id": "7", "currency": "USD"}),
		"an attribute more":          fp("order 1", map[string]string{"order_id": "7", "currency": "EUR", "x": ""}),
		"bytes moved across a field": fp("order 1", map[string]string{"order_id": "7", "currencyE": "UR"}),
	}
	for name, b := range differ {
		if bytes.Equal(b, base) {
			t.Errorf("%s: same fingerprint, want a different one", name)
		}
	}
}

// Lock compares the fingerprint in its context with the record's: a
// different one is a conflict, reported to OnConflict, and the work does
// not run; the same one, or none on either side, is a duplicate.
func TestLockConflict(t *testing.T) {
	type seen struct {
		key         string
		stored, got []byte
	}
	var hooked []seen
	f := newFixture(t, gateway.Options{OnConflict: func(_ context.Context, key string, stored, got []byte) {
		hooked = append(hooked, seen{key, stored, got})
	}})
	ctx := t.Context()
	with := func(fp string) context.Context { return gateway.WithFingerprint(ctx, []byte(fp)) }
	run := func(context.Context) error { t.Error("the work ran for a conflict or a duplicate"); return nil }

	if err := f.g.Lock(with("A"), "order:7", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err := f.g.Lock(with("B"), "order:7", run)
	var ce *gateway.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, gateway.ErrConflict) || ce.Key != "order:7" || string(ce.Stored) != "A" || string(ce.Got) != "B" || !ce.Done {
		t.Fatalf("Lock with another fingerprint = %#v, want a *ConflictError{order:7, A, B, Done}", err)
	}
	if len(hooked) != 1 || hooked[0].key != "order:7" || string(hooked[0].stored) != "A" || string(hooked[0].got) != "B" {
		t.Errorf("OnConflict saw %v, want one call with order:7, A, B", hooked)
	}
	for name, c := range map[string]context.Context{"the same fingerprint": with("A"), "no fingerprint": ctx} {
		if err := f.g.Lock(c, "order:7", run); !errors.Is(err, gateway.ErrDuplicate) {
			t.Errorf("Lock with %s = %v, want ErrDuplicate", name, err)
		}
	}

	// A live holder with another payload: a conflict too, not in progress.
	if _, err := f.st.Claim(ctx, "order:8", time.Minute, store.ClaimOptions{Fingerprint: []byte("C")}); err != nil {
		t.Fatal(err)
	}
	if err := f.g.Lock(with("D"), "order:8", run); !errors.As(err, &ce) || ce.Done {
		t.Errorf("Lock against a holder with another fingerprint = %v, want a *ConflictError with Done false", err)
	}
}

// The fingerprints FingerprintPayload gave before the unwrapped form
// stopped counting headers: records written then must still match their
// redeliveries on the wrapped form (and every other form that carries its
// attributes).
func TestFingerprintPayloadWrappedBytesUnchanged(t *testing.T) {
	for _, tt := range []struct {
		attrs map[string]string
		want  string
	}{
		{map[string]string{"order_id": "7", "currency": "EUR", "googclient_x": "y"}, "818a26cc02a9c706bb638b00be24e078b0c7ec3f3998c991ef292e9308384a03"},
		{map[string]string{"Order_ID": "7"}, "9cebfc8fd0885cb9a67117887044f35808eace05a68442882db368f8426f9c05"},
		{map[string]string{}, "49c076d8bc96eedfa3081a12666eef2b9732e52a805e121a51dee1f27bb95583"},
	} {
		for _, form := range []pushenvelope.Form{pushenvelope.Wrapped, pushenvelope.CloudEventBinary, pushenvelope.CloudEventStructured, 0} {
			b, err := gateway.FingerprintPayload(&pushenvelope.Message{Data: []byte("2 chairs"), Attributes: tt.attrs, Form: form})
			if err != nil || hex.EncodeToString(b) != tt.want {
				t.Errorf("FingerprintPayload(%v, %v) = %x, %v; want %s", form, tt.attrs, b, err, tt.want)
			}
		}
	}
}

// unwrapped is an unwrapped push with write metadata, as Pub/Sub sends it:
// the data as the body, the metadata in x-goog-pubsub-* headers and each
// attribute in a header of its own, plus the request's own headers.
func unwrapped(id, data string, attrs map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(data))
	r.Header.Set("X-Goog-Pubsub-Message-Id", id)
	r.Header.Set("X-Goog-Pubsub-Subscription-Name", "projects/p/subscriptions/unwrapped")
	r.Header.Set("X-Goog-Pubsub-Publish-Time", "2026-11-30T10:00:00.123Z")
	r.Header.Set("Content-Type", "application/octet-stream")
	r.Header.Set("User-Agent", "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)")
	r.Header.Set("Authorization", "Bearer token-1")
	for k, v := range attrs {
		r.Header.Set(k, v)
	}
	return r
}

// behindProxies adds to r what proxies, load balancers and tracing on the
// way may add, fresh for every delivery.
func behindProxies(r *http.Request, hop string) *http.Request {
	for k, v := range map[string]string{
		"Traceparent":           "00-4bf92f3577b34da6a3ce929d0e0e47" + hop + "-00f067aa0ba902b7-01",
		"Tracestate":            "vendor=" + hop,
		"X-Cloud-Trace-Context": "4bf92f3577b34da6a3ce929d0e0e4736/" + hop + ";o=1",
		"X-Forwarded-For":       "10.0.0." + hop,
		"X-Forwarded-Proto":     "https",
		"Forwarded":             "for=10.0.0." + hop,
		"Via":                   "1.1 proxy-" + hop,
		"X-Real-Ip":             "10.0.0." + hop,
		"X-Amzn-Trace-Id":       "Root=1-" + hop,
		"B3":                    hop + "-1",
		"X-B3-Traceid":          hop,
		"Baggage":               "hop=" + hop,
		"X-Envoy-Attempt-Count": hop,
		"Cdn-Loop":              "proxy-" + hop,
		"Accept-Encoding":       "gzip",
		"Content-Language":      "en",
		"Authorization":         "Bearer token-" + hop,
		"User-Agent":            "relay/" + hop,
	} {
		r.Header.Set(k, v)
	}
	return r
}

// fingerprintRequest is f of the message Parse decodes from r.
func fingerprintRequest(t *testing.T, f gateway.FingerprintFunc, r *http.Request) []byte {
	t.Helper()
	m, err := pushenvelope.Decode(r, 0)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := f(m)
	if err != nil || len(fp) != store.MaxFingerprintLen {
		t.Fatalf("fingerprint = %x, %v; want 32 bytes", fp, err)
	}
	return fp
}

// On the unwrapped form an attribute cannot be told from a header, so the
// fingerprint must not count what proxies and tracing add on the way: a
// redelivery of the same message fingerprints the same.
func TestFingerprintUnwrappedRedeliveryBehindProxies(t *testing.T) {
	order := map[string]string{"Order_id": "7", "Currency": "EUR"}
	for name, f := range map[string]gateway.FingerprintFunc{
		"FingerprintPayload":                  gateway.FingerprintPayload,
		"FingerprintData(order_id, currency)": gateway.FingerprintData("order_id", "currency"),
	} {
		t.Run(name, func(t *testing.T) {
			first := fingerprintRequest(t, f, unwrapped("1", "2 chairs", order))
			for _, hop := range []string{"1", "2"} {
				if again := fingerprintRequest(t, f, behindProxies(unwrapped("1", "2 chairs", order), hop)); !bytes.Equal(again, first) {
					t.Errorf("a redelivery through proxy %s fingerprints %x, the first delivery %x", hop, again, first)
				}
			}
			if other := fingerprintRequest(t, f, unwrapped("2", "9 tables", order)); bytes.Equal(other, first) {
				t.Error("another payload fingerprints the same")
			}
		})
	}
}

// The same message through a wrapped and an unwrapped subscription on one
// store: FingerprintData compares the data and the attributes it names,
// their names in any case, so both forms agree; FingerprintData() covers
// the data alone, as FingerprintPayload does on the unwrapped form.
func TestFingerprintAcrossForms(t *testing.T) {
	published := map[string]string{"Order_ID": "7", "currency": "EUR", "googclient_OpenTelemetrySpanContext": "00-abc"}
	wrapped := func(data string, attrs map[string]string) *http.Request {
		return httptest.NewRequest(http.MethodPost, "/", strings.NewReader(push("1", attrs, data)))
	}
	byOrder := gateway.FingerprintData("order_id", "Currency")
	w := fingerprintRequest(t, byOrder, wrapped("2 chairs", published))
	u := fingerprintRequest(t, byOrder, behindProxies(unwrapped("1", "2 chairs", published), "1"))
	if !bytes.Equal(w, u) {
		t.Errorf("FingerprintData: wrapped %x, unwrapped %x; want the same", w, u)
	}
	if !bytes.Equal(w, fingerprintRequest(t, byOrder, wrapped("2 chairs", map[string]string{"order_id": "7", "CURRENCY": "EUR", "note": "not listed"}))) {
		t.Error("FingerprintData: an attribute it does not name, or a name's case, changed the fingerprint")
	}
	for name, r := range map[string]*http.Request{
		"other data":                    unwrapped("1", "9 tables", published),
		"other value of a named attr":   unwrapped("1", "2 chairs", map[string]string{"Order_ID": "7", "currency": "USD"}),
		"a named attribute missing":     unwrapped("1", "2 chairs", map[string]string{"Order_ID": "7"}),
		"a named attribute empty":       unwrapped("1", "2 chairs", map[string]string{"Order_ID": "7", "currency": ""}),
		"wrapped, other value":          wrapped("2 chairs", map[string]string{"Order_ID": "8", "currency": "EUR"}),
		"wrapped, bytes across a field": wrapped("2 chairs", map[string]string{"Order_ID": "7", "currency": "EUR2 chairs"}),
	} {
		if bytes.Equal(fingerprintRequest(t, byOrder, r), w) {
			t.Errorf("FingerprintData, %s: same fingerprint, want another", name)
		}
	}

	dataOnly := fingerprintRequest(t, gateway.FingerprintData(), wrapped("2 chairs", published))
	if u := fingerprintRequest(t, gateway.FingerprintPayload, unwrapped("1", "2 chairs", published)); !bytes.Equal(dataOnly, u) {
		t.Errorf("FingerprintData() of the wrapped message %x, FingerprintPayload of the unwrapped one %x; want the same", dataOnly, u)
	}
	// Listing every attribute, in lower case, gives FingerprintPayload's
	// bytes: a route may move from one to the other.
	lower := map[string]string{"order_id": "7", "currency": "EUR"}
	if a, b := fingerprintRequest(t, gateway.FingerprintPayload, wrapped("2 chairs", lower)), fingerprintRequest(t, gateway.FingerprintData("order_id", "currency"), wrapped("2 chairs", lower)); !bytes.Equal(a, b) {
		t.Errorf("FingerprintPayload %x, FingerprintData of every attribute %x; want the same", a, b)
	}
}

// Through the HTTP surface: an unwrapped redelivery behind proxies is a
// duplicate, not a conflict; another payload under the same key still is
// one; and with FingerprintData a wrapped and an unwrapped subscription
// share a store.
func TestIdempotentUnwrappedFingerprint(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	h := &counting{}
	serve := func(fp gateway.FingerprintFunc, r *http.Request) int {
		rec := httptest.NewRecorder()
		f.g.Route(&gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: fp}).Idempotent(h).ServeHTTP(rec, r)
		return rec.Code
	}
	order := map[string]string{"Order_id": "7", "Currency": "EUR"}
	for _, step := range []struct {
		why  string
		fp   gateway.FingerprintFunc
		r    *http.Request
		want int
	}{
		{"first delivery", gateway.FingerprintPayload, unwrapped("1", "2 chairs", order), 200},
		{"its redelivery behind a proxy", gateway.FingerprintPayload, behindProxies(unwrapped("1", "2 chairs", order), "1"), 204},
		{"another order under the same order_id", gateway.FingerprintPayload, unwrapped("2", "9 tables", order), 409},
		{"order 8, unwrapped", gateway.FingerprintData("order_id", "currency"), unwrapped("3", "1 lamp", map[string]string{"Order_ID": "8", "Currency": "EUR"}), 200},
		{"order 8, wrapped", gateway.FingerprintData("order_id", "currency"), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(push("3", map[string]string{"order_id": "8", "Currency": "EUR"}, "1 lamp"))), 204},
		{"order 8 in another currency, wrapped", gateway.FingerprintData("order_id", "currency"), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(push("4", map[string]string{"order_id": "8", "Currency": "USD"}, "1 lamp"))), 409},
	} {
		if got := serve(step.fp, step.r); got != step.want {
			t.Fatalf("%s: status %d, want %d", step.why, got, step.want)
		}
	}
	if n := h.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

// FingerprintData's documented rules for the names it is given and the
// attributes it finds: a name listed twice, in any case, or an empty name,
// counts once or not at all; a name matches an attribute in any case,
// whatever other attributes sort before it; and among several spellings of
// one name the lower-case one counts, else the first in byte order.
func TestFingerprintDataNames(t *testing.T) {
	fp := func(f gateway.FingerprintFunc, attrs map[string]string) []byte {
		t.Helper()
		b, err := f(&pushenvelope.Message{Data: []byte("order"), Attributes: attrs})
		if err != nil || len(b) != store.MaxFingerprintLen {
			t.Fatalf("fingerprint = %x, %v; want 32 bytes", b, err)
		}
		return b
	}
	byID := gateway.FingerprintData("order_id")
	want := fp(byID, map[string]string{"order_id": "7"})
	for _, tc := range []struct {
		why   string
		f     gateway.FingerprintFunc
		attrs map[string]string
	}{
		{"the name listed twice in two cases", gateway.FingerprintData("order_id", "ORDER_ID"), map[string]string{"order_id": "7"}},
		{"an empty name listed", gateway.FingerprintData("", "order_id"), map[string]string{"order_id": "7", "": "x"}},
		{"other attributes sorting before the match", byID, map[string]string{"A_first": "x", "B": "y", "Order_ID": "7"}},
		{"the lower-case spelling among others", byID, map[string]string{"ORDER_ID": "1", "Order_Id": "2", "order_id": "7"}},
		{"no lower-case spelling: the first in byte order", byID, map[string]string{"Order_Id": "2", "ORDER_ID": "7", "order_ID": "3"}},
	} {
		if got := fp(tc.f, tc.attrs); !bytes.Equal(got, want) {
			t.Errorf("%s: fingerprint %x, want %x (that of order_id=7 alone)", tc.why, got, want)
		}
	}
}

// The route's fingerprint belongs to the route's key: a Lock the body
// takes on another key compares nothing, and keeps no fingerprint.
func TestNestedLockIgnoresTheRouteFingerprint(t *testing.T) {
	f := newFixture(t, gateway.Options{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload})
	doneWith(t, f.st, "welcome-mail:c-42", "some other fingerprint")
	var nested, fresh error
	h := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nested = f.g.Lock(r.Context(), "welcome-mail:c-42", func(context.Context) error { return nil })
		fresh = f.g.Lock(r.Context(), "invoice:c-42", func(context.Context) error { return nil })
	}))
	wantStatus(t, deliver(t, h, push("1", map[string]string{"order_id": "7"}, "2 chairs")), http.StatusOK, "the route")
	if !errors.Is(nested, gateway.ErrDuplicate) {
		t.Errorf("nested Lock on a done key = %v, want ErrDuplicate", nested)
	}
	if fresh != nil {
		t.Fatalf("nested Lock on a fresh key = %v", fresh)
	}
	if rec, ok, err := f.st.Inspect(t.Context(), "invoice:c-42"); err != nil || !ok || rec.Fingerprint != nil {
		t.Errorf("the nested key's record = %+v, %v, %v; want one without a fingerprint", rec, ok, err)
	}
}
