package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/example"
	"github.com/idemgate/idemgate/pushauth"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
)

// prefixed namespaces the keys of one route, so that routes sharing a store
// never dedupe each other's messages.
func prefixed(prefix string, k gateway.KeyFunc) gateway.KeyFunc {
	return func(m *pushenvelope.Message) (string, error) {
		key, err := k(m)
		if err != nil {
			return "", err
		}
		return prefix + key, nil
	}
}

// newGateway returns the one Gateway of st: every route on st shares it,
// with fc's treatment of failures.
func newGateway(st store.Store, cfg example.Config, fc failureConfig, log *slog.Logger) (*gateway.Gateway, error) {
	o := gateway.Options{Lease: cfg.Lease, Logger: log}
	fc.apply(&o)
	return gateway.New(st, &o)
}

// newServer builds the routes on g, the Gateway of st. bare serves the same
// action without any guard; it exists only to measure the guard's cost
// (docs/benchmarks.md).
func newServer(ctx context.Context, g *gateway.Gateway, st store.Store, cfg example.Config, log *slog.Logger, bare bool) (http.Handler, error) {
	sup := example.NewSupplier(cfg.SupplierURL, log)
	byMessage := g.Route(&gateway.RouteOptions{Key: prefixed("msg:", gateway.KeyFromMessageID)})
	orders := &gateway.RouteOptions{Key: gateway.KeyFromAttribute("order_id")}
	if cfg.OrdersFingerprint != "" {
		orders.Fingerprint, orders.AcceptConflicts = gateway.FingerprintPayload, new(cfg.OrdersFingerprint == "accept")
	}
	byOrder := g.Route(orders)
	byUpdate := g.Route(&gateway.RouteOptions{Key: prefixed("po-update:", gateway.KeyFromMessageID)})

	send := func(ctx context.Context, m *pushenvelope.Message) error {
		return sup.Send(ctx, keyOf(ctx, m), m.Data, m.Attributes)
	}
	// A PO update runs under two keys: its messageId (dedupe, by the route's
	// gateway) and its po_id (serialize, with Mutex).
	update := func(ctx context.Context, m *pushenvelope.Message) error {
		po := m.Attributes["po_id"]
		if po == "" {
			log.Warn("po update without a po_id attribute; acknowledged without action", slog.String("message_id", m.ID))
			return nil
		}
		key := keyOf(ctx, m)
		return g.Mutex(ctx, "po:"+po, func(ctx context.Context) error {
			return sup.Send(ctx, key, m.Data, m.Attributes)
		})
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	if bare {
		mux.Handle("POST /", bareHandler(send))
		mux.Handle("POST /orders", bareHandler(send))
		mux.Handle("POST /po-updates", bareHandler(send))
		return mux, nil
	}
	mux.Handle("POST /", byMessage.Push(send))
	mux.Handle("POST /orders", byOrder.Push(send))
	mux.Handle("POST /po-updates", byUpdate.Idempotent(pushHandler(update)))
	l, err := newLedger(ctx, st, log)
	if err != nil {
		return nil, err
	}
	if l == nil {
		mux.Handle("POST /ledger", noLedger(log))
		return mux, nil
	}
	byLedger := g.Route(&gateway.RouteOptions{Key: prefixed("ledger:", gateway.KeyFromMessageID)})
	mux.Handle("POST /ledger", byLedger.Push(l.record))
	return mux, nil
}

// withPushAuth puts push authentication in front of the push routes when an
// audience is configured. Only the probe, GET or HEAD /healthz, stays open:
// any other request to that path (a POST, which the mux would route to the
// push route at /) is verified like every push.
func withPushAuth(h http.Handler, audience, account string, log *slog.Logger) (http.Handler, error) {
	if audience == "" && account == "" {
		return h, nil
	}
	v, err := pushauth.New(&pushauth.Options{Audience: audience, ServiceAccountEmail: account, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("PUSH_AUDIENCE/PUSH_SERVICE_ACCOUNT: %w", err)
	}
	guarded := v.Middleware(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			h.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	}), nil
}

// keyOf is the idempotency key the supplier gets: the claim's key under a
// guard, the messageId in the bare baseline.
func keyOf(ctx context.Context, m *pushenvelope.Message) string {
	if c, ok := gateway.ClaimFromContext(ctx); ok {
		return c.Key
	}
	return "msg:" + m.ID
}

// pushHandler turns fn into a handler whose status tells Pub/Sub what to do:
// a PO held by another update is a 503 (retry later), any other error 500.
func pushHandler(fn func(context.Context, *pushenvelope.Message) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := pushenvelope.FromContext(r.Context())
		err := fn(r.Context(), m)
		switch {
		case err == nil:
			w.WriteHeader(http.StatusOK)
		case errors.Is(err, gateway.ErrInProgress):
			http.Error(w, "another update of this PO is running", http.StatusServiceUnavailable)
		default:
			http.Error(w, "update failed", http.StatusInternalServerError)
		}
	})
}

// bareHandler decodes the push and runs fn with the messageId as key, with
// no store: the baseline of the benchmark.
func bareHandler(fn func(context.Context, *pushenvelope.Message) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, err := pushenvelope.Decode(r, 0)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		if err := fn(ctx, m); err != nil {
			http.Error(w, "failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
