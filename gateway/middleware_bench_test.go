package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/benchratio"
)

// baselinePush is what a hand-written push handler does without a guard:
// decode the same envelope fields with encoding/json and run the action.
func baselinePush(w http.ResponseWriter, r *http.Request) {
	var env struct {
		Message struct {
			Data        []byte            `json:"data"`
			Attributes  map[string]string `json:"attributes"`
			MessageID   string            `json:"messageId"`
			PublishTime time.Time         `json:"publishTime"`
			OrderingKey string            `json:"orderingKey"`
		} `json:"message"`
		Subscription    string `json:"subscription"`
		DeliveryAttempt int    `json:"deliveryAttempt"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &env)
	}
	if err != nil || env.Message.MessageID == "" {
		http.Error(w, "bad push", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// BenchmarkPushHandler compares, side by side, a push handler guarded by
// Idempotent on memstore (every delivery a fresh message: claim, run,
// complete) with the unguarded baseline above. The ratio of their ns/op is
// the guard's throughput cost (docs/benchmarks.md).
func BenchmarkPushHandler(b *testing.B) {
	bodies := make([]string, 1<<12)
	for i := range bodies {
		bodies[i] = push(strconv.Itoa(i), map[string]string{"order_id": "o-" + strconv.Itoa(i)}, `{"order_id":"o-1","amount":1250}`)
	}
	g, _ := gateway.New(newFreshStore(), &gateway.Options{NoRenew: true}) // every delivery is fresh
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	handlers := []struct {
		name string
		h    http.Handler
	}{
		{"Baseline", http.HandlerFunc(baselinePush)},
		{"Idempotent", g.Idempotent(ok)},
	}
	// Ratio alternates the two in rounds on one goroutine, so that both
	// see the same machine noise, and reports Idempotent's throughput as a
	// fraction of the baseline's (docs/benchmarks.md).
	b.Run("Ratio", func(b *testing.B) {
		serve := func(h http.Handler) benchratio.Work {
			return func(_ context.Context, i int64) error {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(bodies[i&(1<<12-1)])))
				if rec.Code != http.StatusOK {
					return fmt.Errorf("status %d", rec.Code)
				}
				return nil
			}
		}
		benchratio.Compare(b, 1, 2048, serve(handlers[1].h), serve(handlers[0].h))
	})
	for _, bc := range handlers {
		b.Run(bc.name, func(b *testing.B) {
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					rec := httptest.NewRecorder()
					body := bodies[n.Add(1)&(1<<12-1)]
					req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
					bc.h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("status %d", rec.Code)
					}
				}
			})
		})
	}
}
