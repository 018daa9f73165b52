package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// deliver pushes message m to h as attempt 1 and returns the status.
func deliverTo(t testing.TB, h http.Handler, c config, m *message) int {
	t.Helper()
	req, err := newRequest(context.Background(), c, m, 1)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestSelfTarget(t *testing.T) {
	sup := newSupplier(1, 0) // the first action of each order fails
	supSrv := newSupplierServer(t, sup)
	client := supSrv.Client()
	tg := newSelfTarget(supSrv.URL+"/", client)
	for _, form := range []string{formWrapped, formUnwrapped} {
		t.Run(form, func(t *testing.T) {
			c := testConfig("http://self.invalid/orders")
			c.Form = form
			c.N = 2
			c.Republish = 1
			msgs := buildTest(t, c, 11)
			orderID := msgs[0].orderID
			var again *message
			for _, m := range msgs[1:] {
				if m.orderID == orderID {
					again = m
				}
			}
			if form == formUnwrapped {
				// Keep the orders of the two subtests apart.
				for _, m := range []*message{msgs[0], again} {
					m.attrs["order_id"] = "u-" + orderID
				}
			}
			steps := []struct {
				m    *message
				want int
				why  string
			}{
				{msgs[0], http.StatusInternalServerError, "supplier refused: the action failed, nack"},
				{msgs[0], http.StatusOK, "redelivery runs the action again and succeeds"},
				{msgs[0], http.StatusNoContent, "transport duplicate: already done"},
				{again, http.StatusNoContent, "republish (new messageId, same order_id): already done"},
			}
			for _, s := range steps {
				if got := deliverTo(t, tg, c, s.m); got != s.want {
					t.Errorf("%s: status %d, want %d", s.why, got, s.want)
				}
			}
		})
	}
	if s := sup.snapshot(false); s.DistinctKeys != 2 || s.Accepted != 2 || s.KeysAcceptedMoreThanOnce != 0 {
		t.Errorf("supplier = %+v, want 2 orders each accepted once", s)
	}
}

func TestSelfTargetInProgress(t *testing.T) {
	sup := newSupplier(0, 0)
	arrived := make(chan struct{})
	release := make(chan struct{})
	sup.work = func(context.Context) {
		close(arrived)
		<-release
	}
	supSrv := newSupplierServer(t, sup)
	tg := newSelfTarget(supSrv.URL+"/", supSrv.Client())
	c := testConfig("http://self.invalid/orders")
	m := buildTest(t, c, 12)[0]

	var wg sync.WaitGroup
	var first int
	wg.Go(func() { first = deliverTo(t, tg, c, m) })
	<-arrived // the first delivery is inside the action
	if got := deliverTo(t, tg, c, m); got != http.StatusServiceUnavailable {
		t.Errorf("concurrent copy while the action runs: status %d, want 503", got)
	}
	close(release)
	wg.Wait()
	if first != http.StatusOK {
		t.Errorf("first delivery: status %d, want 200", first)
	}
}

func TestSelfTargetRejectsNonPush(t *testing.T) {
	tg := newSelfTarget("http://unused.invalid/", http.DefaultClient)
	for name, body := range map[string]string{"not JSON": "hello", "no order_id": `{"message":{"data":"e30="}}`} {
		rec := httptest.NewRecorder()
		tg.ServeHTTP(rec, httptest.NewRequest("POST", "/orders", bytes.NewBufferString(body)))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, rec.Code)
		}
	}
}
