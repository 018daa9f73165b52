package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/idemgate/idemgate/cloudevent"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/example"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
)

// messageKey is "msg:" and the messageId, the key example-run gives the same
// message on its POST / route. An event that is not a Pub/Sub message (its
// message has no Form) has no key: the function fails it closed.
func messageKey(m *pushenvelope.Message) (string, error) {
	if m.Form == 0 {
		return "", fmt.Errorf("not a Pub/Sub message (source %q)", m.Source)
	}
	id, err := gateway.KeyFromMessageID(m)
	if err != nil {
		return "", err
	}
	return "msg:" + id, nil
}

// newOnOrder returns the OnOrder function: the supplier action of the
// examples under cloudevent.Wrap.
func newOnOrder(st store.Store, cfg example.Config, log *slog.Logger) (func(context.Context, event.Event) error, error) {
	g, err := gateway.New(st, &gateway.Options{Lease: cfg.Lease, Logger: log})
	if err != nil {
		return nil, err
	}
	sup := example.NewSupplier(cfg.SupplierURL, log)
	send := func(ctx context.Context, e event.Event) error {
		m, ok := pushenvelope.FromContext(ctx)
		if !ok { // only on a disabled gateway: the key needs a Pub/Sub message
			log.Warn("not a Pub/Sub message; acknowledged without action", slog.String("type", e.Type()), slog.String("id", e.ID()))
			return nil
		}
		key, _ := messageKey(m)
		if c, ok := gateway.ClaimFromContext(ctx); ok {
			key = c.Key
		}
		return sup.Send(ctx, key, m.Data, m.Attributes)
	}
	return cloudevent.Wrap(g, send, &cloudevent.Options{Route: gateway.RouteOptions{Key: messageKey}, Logger: log}), nil
}
