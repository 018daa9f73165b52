package pushauth_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushauth"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

// The verifier goes in front of the gateway: a request without the push
// subscription's token is refused before it can claim a key.
func ExampleVerifier_Middleware() {
	v, err := pushauth.New(&pushauth.Options{
		Audience:            "https://orders-abc123-ew.a.run.app/",
		ServiceAccountEmail: "pubsub-push@my-project.iam.gserviceaccount.com",
		Logger:              slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	st, _ := memstore.New(nil)
	g, _ := gateway.New(st, nil)
	orders := g.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		caller, _ := pushauth.FromContext(ctx)
		fmt.Println("order from", caller.Claims["email"])
		return nil
	})
	h := v.Middleware(orders) // http.Handle("POST /", h)

	// A delivery that did not come from the subscription.
	body := `{"message":{"messageId":"1","data":"e30="},"subscription":"projects/p/subscriptions/orders"}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
	fmt.Print(rec.Body)
	// Output:
	// 401 Bearer
	// pushauth: no bearer token
}
