package cloudevent_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/pushenvelope"
)

// What functions-framework refuses before Wrap runs, and what the push
// path (pushenvelope, for Cloud Run) refuses: the two agree on the
// attributes the CloudEvents spec requires. docs/cloudfunctions.md lists
// these rows.
func TestRequiredAttributesOnBothPaths(t *testing.T) {
	var ran atomic.Int32
	base := serveFunction(t, func(context.Context, event.Event) error { ran.Add(1); return nil })
	for _, tc := range []struct {
		name   string
		change func(r *http.Request)
		status int // the framework's answer; any refusal is a 400 on the push path
	}{
		{"all four attributes, spec 1.0", func(*http.Request) {}, 200},
		{"spec 0.3", func(r *http.Request) { r.Header.Set("Ce-Specversion", "0.3") }, 200},
		{"spec 2.0", func(r *http.Request) { r.Header.Set("Ce-Specversion", "2.0") }, 415},
		{"no source", func(r *http.Request) { r.Header.Del("Ce-Source") }, 400},
		{"empty source", func(r *http.Request) { r.Header.Set("Ce-Source", "") }, 400},
		{"no type", func(r *http.Request) { r.Header.Del("Ce-Type") }, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran.Store(0)
			r := binaryRequest(base, message{id: "1", data: "x"})
			tc.change(r)
			pushReq := httptest.NewRequest(http.MethodPost, "/", r.Body)
			pushReq.Header = r.Header.Clone()
			r = binaryRequest(base, message{id: "1", data: "x"})
			tc.change(r)
			resp, err := client.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || (ran.Load() == 1) != (tc.status == 200) {
				t.Errorf("framework: %d, function ran %d times; want %d", resp.StatusCode, ran.Load(), tc.status)
			}
			_, err = pushenvelope.Decode(pushReq, 0)
			if refused := errors.Is(err, pushenvelope.ErrNotPush); refused != (tc.status != 200) {
				t.Errorf("push path: Decode = %v; the framework answers %d, the push path must agree", err, tc.status)
			}
		})
	}
}
