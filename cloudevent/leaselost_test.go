package cloudevent_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// unrenewable is a memstore whose Extend always fails, as a store out of
// reach does.
type unrenewable struct{ *memstore.Store }

func (unrenewable) Extend(context.Context, store.Claim, time.Duration) (store.Claim, error) {
	return store.Claim{}, errors.New("store out of reach")
}

// A function that returns nil after its lease was lost (it bailed out on
// ctx.Done) did not hold its key to the end: the event is not acked, and
// not recorded done (issue 21, item 3; the simulator found that the
// function's nil was answered as it was).
func TestLeaseLostFunctionIsNotAcked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, _ := memstore.New(nil)
		g, err := gateway.New(unrenewable{mem}, &gateway.Options{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		fn := cloudevent.Wrap(g, func(ctx context.Context, e event.Event) error {
			<-ctx.Done()
			return nil
		}, &cloudevent.Options{Logger: quiet()})
		err = fn(t.Context(), pubsubEvent(t, "m-1", nil))
		var res *cehttp.Result
		if !errors.As(err, &res) || res.StatusCode != 500 {
			t.Fatalf("answer = %v, want a 500 result", err)
		}
		if rec, ok, err := mem.Inspect(t.Context(), "m-1"); err != nil || !ok || !rec.Released() {
			t.Fatalf("record %+v, %v, %v; want the claim released, not DONE", rec, ok, err)
		}
	})
}
