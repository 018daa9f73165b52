package pull

import (
	"context"
	"log/slog"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/internal/guard"
)

// logAck writes a line about the ack or nack of m, with the key and the
// "delivery" group of the guard's line for the same message, so that one
// log query finds both.
func (h *handler) logAck(ctx context.Context, res *guard.Result, level slog.Level, msg string, m *pubsub.Message, extra ...slog.Attr) {
	if !res.Log.Enabled(ctx, level) {
		return
	}
	group := make([]slog.Attr, 0, 4)
	group = append(group, slog.String("message_id", m.ID), slog.String("form", "pull"))
	if h.opts.Subscription != "" {
		group = append(group, slog.String("subscription", h.opts.Subscription))
	}
	if m.DeliveryAttempt != nil {
		group = append(group, slog.Int("delivery_attempt", *m.DeliveryAttempt))
	}
	attrs := append([]slog.Attr{res.KeyAttr, {Key: "delivery", Value: slog.GroupValue(group...)}}, extra...)
	res.Log.LogAttrs(ctx, level, msg, attrs...)
}
