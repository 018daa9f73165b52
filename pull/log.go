package pull

import (
	"context"
	"log/slog"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
)

// logf writes one line about m with the fields the gateway's HTTP surface
// uses too ("outcome", "key" or "key_digest", and a "delivery" group), so
// that one log query covers push and pull consumers. Empty outcome and key
// are left out.
func (h *handler) logf(ctx context.Context, level slog.Level, msg string, outcome gateway.Outcome, key string, m *pubsub.Message, extra ...slog.Attr) {
	if !h.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 3+len(extra))
	if outcome != "" {
		attrs = append(attrs, outcome.Attr())
	}
	if key != "" {
		attrs = append(attrs, h.g.KeyAttr(key))
	}
	attrs = append(attrs, h.deliveryAttr(m))
	attrs = append(attrs, extra...)
	h.log.LogAttrs(ctx, level, msg, attrs...)
}

// deliveryAttr groups what identifies a delivery of m.
func (h *handler) deliveryAttr(m *pubsub.Message) slog.Attr {
	attrs := make([]slog.Attr, 0, 4)
	attrs = append(attrs, slog.String("message_id", m.ID), slog.String("form", "pull"))
	if h.opts.Subscription != "" {
		attrs = append(attrs, slog.String("subscription", h.opts.Subscription))
	}
	if m.DeliveryAttempt != nil {
		attrs = append(attrs, slog.Int("delivery_attempt", *m.DeliveryAttempt))
	}
	return slog.Attr{Key: "delivery", Value: slog.GroupValue(attrs...)}
}
