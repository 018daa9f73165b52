package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pushenvelope"
)

// deliverTo posts body to path through h.
func deliverTo(t testing.TB, h http.Handler, path, body string, hdr http.Header) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range hdr {
		r.Header[k] = v
	}
	h.ServeHTTP(rec, r)
	return rec
}

// A refused request's line keeps what could still be read of it: its
// message id, subscription and route, and the form it was read as, one of
// the documented forms.
func TestRejectedLineKeepsWhatWasDecoded(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		hdr        http.Header
		status     int
		form, id   string
		sub        string
	}{
		{name: "wrapped, data not base64", body: `{"message":{"messageId":"42","data":"%%%"},"subscription":"projects/p/subscriptions/s"}`,
			status: 400, form: "wrapped", id: "42", sub: "projects/p/subscriptions/s"},
		{name: "wrapped, over the limit", body: push("43", nil, strings.Repeat("x", 2048)), status: 413, form: "wrapped"},
		{name: "unwrapped, bad publish time", body: "raw", hdr: http.Header{"X-Goog-Pubsub-Message-Id": {"44"},
			"X-Goog-Pubsub-Subscription-Name": {"projects/p/subscriptions/u"}, "X-Goog-Pubsub-Publish-Time": {"yesterday"}},
			status: 400, form: "unwrapped", id: "44", sub: "projects/p/subscriptions/u"},
		{name: "binary CloudEvent of another type", hdr: http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"45"}, "Ce-Source": {"//src"}, "Ce-Type": {"other"}},
			status: 400, form: "cloudevent-binary", id: "45"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, gateway.Options{MaxBodyBytes: 1024})
			h := &counting{}
			wantStatus(t, deliverTo(t, f.g.Idempotent(h), "/orders", tc.body, tc.hdr), tc.status, tc.name)
			lines := f.logs.Records().Outcome(gateway.OutcomeRejected).Level(slog.LevelWarn)
			if len(lines) != 1 {
				t.Fatalf("want one WARN rejected line, got:\n%s", f.logs.Records())
			}
			got := lines[0].Attrs
			if got["delivery.form"] != tc.form || got["delivery.message_id"] != tc.id || got["delivery.subscription"] != tc.sub || got["delivery.path"] != "/orders" {
				t.Errorf("rejected line %v; want form %q, message_id %q, subscription %q, path /orders", got, tc.form, tc.id, tc.sub)
			}
		})
	}
}

// Every delivery line names its route.
func TestDeliveryLinesNameThePath(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	h := &counting{}
	srv := f.g.Idempotent(h)
	deliverTo(t, srv, "/po-updates", push("1", nil, "x"), nil)
	deliverTo(t, srv, "/po-updates", push("1", nil, "x"), nil)
	h.status.Store(500)
	deliverTo(t, srv, "/po-updates", push("2", nil, "x"), nil)
	recs := f.logs.Records()
	for _, o := range []gateway.Outcome{gateway.OutcomeWon, gateway.OutcomeDuplicate, gateway.OutcomeFailed} {
		if lines := recs.Outcome(o); len(lines) != 1 || lines[0].Attrs["delivery.path"] != "/po-updates" {
			t.Errorf("%s: want one line with delivery.path /po-updates, got:\n%s", o, lines)
		}
	}
}

// On Idempotent routes a failure's line carries the start of what the
// handler answered with it: the cause, bounded and escaped. Not what it
// wrote under a 2xx before.
func TestHandlerFailureLogsItsBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   gateway.Options
		handle func(w http.ResponseWriter)
		want   string
	}{
		{"http.Error", gateway.Options{}, func(w http.ResponseWriter) {
			http.Error(w, "card declined\x1b[31m for 1", http.StatusPaymentRequired)
		}, `card declined\x1b[31m for 1\n`},
		{"progress, then a failure", gateway.Options{}, func(w http.ResponseWriter) {
			w.Write([]byte("card 4111 charged"))
			http.Error(w, "supplier down", http.StatusBadGateway)
		}, `supplier down\n`},
		{"long", gateway.Options{}, func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(strings.Repeat("é", 200) + "\xff"))
		}, strings.Repeat("é", 128) + "…"},
		{"HideKeys", gateway.Options{HideKeys: true}, func(w http.ResponseWriter) {
			http.Error(w, "order 1 refused", http.StatusConflict)
		}, "order " + digestOf("1") + ` refused\n`},
		{"no body", gateway.Options{}, func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.opts)
			srv := f.g.Idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tc.handle(w) }))
			deliver(t, srv, push("1", nil, "x"))
			lines := f.logs.Records().Outcome(gateway.OutcomeFailed).Level(slog.LevelError).Containing("handler failed")
			if len(lines) != 1 {
				t.Fatalf("want one ERROR handler failed line, got:\n%s", f.logs.Records())
			}
			if got, ok := lines[0].Attrs["handler_body"]; got != tc.want || ok != (tc.want != "") {
				t.Errorf("handler_body = %q (present: %v), want %q, and none for a handler that wrote nothing", got, ok, tc.want)
			}
		})
	}
}

// A handler's own 503 or 429 is contention, like the gateway's in-progress
// answer: WARN, not ERROR.
func TestHandlerBusyIsAWarning(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			f := newFixture(t, gateway.Options{})
			h := &counting{}
			h.status.Store(int32(code))
			wantStatus(t, deliver(t, f.g.Idempotent(h), push("1", nil, "x")), code, "a busy handler")
			recs := f.logs.Records()
			if n := len(recs.Level(slog.LevelError)); n != 0 {
				t.Errorf("%d ERROR lines for a busy handler:\n%s", n, recs)
			}
			if n := len(recs.Level(slog.LevelWarn).Outcome(gateway.OutcomeFailed).Containing("handler answered busy")); n != 1 {
				t.Errorf("want one WARN busy line, got:\n%s", recs)
			}
		})
	}
}

// A duplicate acknowledged leaves a line at INFO by default, with the fence
// of the delivery that did the work (whose own line, at DEBUG, carries it
// too); DuplicateLogLevel moves it.
func TestDuplicateLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level slog.Level
	}{{"default", slog.LevelInfo}, {"DuplicateLogLevel debug", slog.LevelDebug}, {"DuplicateLogLevel warn", slog.LevelWarn}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, gateway.Options{DuplicateLogLevel: tc.level})
			srv := f.g.Idempotent(&counting{})
			deliver(t, srv, push("1", nil, "x"))
			deliver(t, srv, push("1", nil, "x"))
			recs := f.logs.Records()
			won, dup := recs.Outcome(gateway.OutcomeWon), recs.Outcome(gateway.OutcomeDuplicate)
			if len(won) != 1 || len(dup) != 1 {
				t.Fatalf("want one won and one duplicate line, got:\n%s", recs)
			}
			if won[0].Level != slog.LevelDebug || dup[0].Level != tc.level {
				t.Errorf("won at %v, duplicate at %v; want DEBUG and %v", won[0].Level, dup[0].Level, tc.level)
			}
			if fw, fd := won[0].Attrs["fence"], dup[0].Attrs["fence"]; fw == "" || fw == "0" || fw != fd {
				t.Errorf("fence of the won line %q, of the duplicate %q: want the same, set", fw, fd)
			}
		})
	}
}

// Durations in lines name their unit: duration_ms, a number of
// milliseconds, in the JSON a log collector reads. It is the delivery's
// own time, in the won (DEBUG) and the duplicate (INFO) line alike.
func TestDurationNamesItsUnit(t *testing.T) {
	logs := &logtest.Sink{}
	f := newFixture(t, gateway.Options{})
	g, err := gateway.New(f.st, &gateway.Options{NoRenew: true, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := g.Idempotent(&counting{})
	deliver(t, srv, push("1", nil, "x"))
	deliver(t, srv, push("1", nil, "x"))
	recs := logs.Records()
	if len(recs) != 2 || recs[0].Level != slog.LevelDebug || recs[1].Level != slog.LevelInfo {
		t.Fatalf("lines:\n%swant the won one at DEBUG, then the duplicate at INFO", recs)
	}
	for _, r := range recs {
		line, err := r.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if ms, ok := line["duration_ms"].(float64); !ok || ms < 0 || ms > float64(time.Minute/time.Millisecond) || line["duration"] != nil {
			t.Errorf("line %v: want a duration_ms number, the delivery's time (under a minute here), and no duration", line)
		}
	}
}

// Every line about a delivery identifies it in its "delivery" group with
// what the adapter knew: only what is set, so a missing field reads as
// missing rather than as an empty or zero value.
func TestDeliveryGroup(t *testing.T) {
	full := &pushenvelope.Message{ID: "m-1", Source: "//pubsub.googleapis.com/projects/p/topics/t", Subscription: "projects/p/subscriptions/s", DeliveryAttempt: 3}
	for _, tc := range []struct {
		name string
		d    gateway.Delivery
		want map[string]string
	}{
		{"everything", gateway.Delivery{Message: full, Form: "cloudevent", Path: "/orders", EventType: "google.cloud.pubsub.topic.v1.messagePublished"},
			map[string]string{"message_id": "m-1", "form": "cloudevent", "path": "/orders", "type": "google.cloud.pubsub.topic.v1.messagePublished",
				"source": full.Source, "subscription": full.Subscription, "delivery_attempt": "3"}},
		{"a message with no more than its id", gateway.Delivery{Message: &pushenvelope.Message{ID: "m-2"}, Form: "pull"},
			map[string]string{"message_id": "m-2", "form": "pull"}},
		{"no message", gateway.Delivery{Form: "push-wrapped", Path: "/", Invalid: pushenvelope.ErrNotPush},
			map[string]string{"form": "push-wrapped", "path": "/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, gateway.Options{})
			d := tc.d
			f.g.Deliver(t.Context(), &d, func(context.Context) error { return nil })
			recs := f.logs.Records()
			if len(recs) != 1 {
				t.Fatalf("want one line, got:\n%s", recs)
			}
			got := map[string]string{}
			for k, v := range recs[0].Attrs {
				if name, ok := strings.CutPrefix(k, "delivery."); ok {
					got[name] = v
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("delivery group = %v, want %v", got, tc.want)
			}
		})
	}
}

// An adapter's own line (a pull ack that failed) is written as the guard
// writes its lines: the key, the delivery's group, and every attribute
// the adapter gave, however many.
func TestAdapterLine(t *testing.T) {
	f := newFixture(t, gateway.Options{})
	d := &gateway.Delivery{Message: &pushenvelope.Message{ID: "m-1"}, Form: "pull", Key: "k"}
	f.g.LogDelivery(t.Context(), d, slog.LevelWarn, "ack failed",
		slog.String("a", "1"), slog.String("b", "2"), slog.String("c", "3"), slog.String("d", "4"), slog.String("e", "5"))
	recs := f.logs.Records().Level(slog.LevelWarn).Containing("ack failed")
	if len(recs) != 1 {
		t.Fatalf("want one WARN line, got:\n%s", f.logs.Records())
	}
	want := map[string]string{"key": "k", "delivery.message_id": "m-1", "delivery.form": "pull", "a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
	if !maps.Equal(recs[0].Attrs, want) {
		t.Errorf("line attributes = %v, want %v", recs[0].Attrs, want)
	}
}

// digestOf is key as a gateway with HideKeys logs it.
func digestOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:8])
}
