package pull

import (
	"context"
	"log/slog"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
)

// ack acknowledges m, whose delivery had outcome o, and, on a subscription
// with exactly-once delivery, waits for Pub/Sub to accept it. A failed ack
// is logged with what its redelivery will meet (see redelivery).
func (h *handler) ack(ctx context.Context, m *pubsub.Message, d *gateway.Delivery, o gateway.Outcome) {
	if h.opts.AckTimeout < 0 {
		m.Ack()
		return
	}
	h.await(ctx, m, d, m.AckWithResult(), o)
}

// redelivery says what the redelivery of a message acked after outcome o
// will meet, should the ack be lost.
func redelivery(o gateway.Outcome) string {
	switch o {
	case gateway.OutcomeWon, gateway.OutcomeDuplicate:
		return "the key is done, so the gateway answers it as a duplicate"
	case gateway.OutcomeConflict:
		return "the key is done for another payload, so the gateway accepts it as a duplicate again"
	case gateway.OutcomeFencedOut:
		return "another claim took the key over, so the gateway answers it as in progress while that holder works, then as a duplicate"
	case gateway.OutcomeCompleteError:
		return "the key was not recorded as done, so once the claim's lease ends it may run the work again"
	case gateway.OutcomeUnguarded:
		return "the message ran unguarded, so it runs the work again, unguarded"
	}
	return "the gateway answers it by the key's record"
}

// nack asks Pub/Sub to redeliver m. A failed nack only delays the retry: the
// message comes back when its ack deadline passes.
func (h *handler) nack(ctx context.Context, m *pubsub.Message, d *gateway.Delivery) {
	if h.opts.AckTimeout < 0 {
		m.Nack()
		return
	}
	h.await(ctx, m, d, m.NackWithResult(), "")
}

// await waits up to AckTimeout for r, and logs anything but success. acked
// is the outcome an ack settles; empty for a nack. Without exactly-once
// delivery r is ready at once.
func (h *handler) await(ctx context.Context, m *pubsub.Message, d *gateway.Delivery, r *pubsub.AckResult, acked gateway.Outcome) {
	select {
	case <-r.Ready():
	default:
		wctx, cancel := context.WithTimeout(ctx, h.opts.AckTimeout)
		select {
		case <-r.Ready():
		case <-wctx.Done():
		}
		cancel()
	}
	select {
	case <-r.Ready():
	default:
		level, why := slog.LevelWarn, "no result within AckTimeout"
		if ctx.Err() != nil {
			// Receive is stopping; the client still sends the ack.
			level, why = slog.LevelDebug, "Receive is stopping"
		}
		msg, attrs := "idemgate: nack not confirmed; the message is redelivered at the latest when its ack deadline passes", []slog.Attr(nil)
		if acked != "" {
			msg = "idemgate: ack not confirmed; if it was lost, Pub/Sub redelivers the message: " + redelivery(acked)
			attrs = append(attrs, slog.String("acked_outcome", string(acked)))
		}
		h.g.LogDelivery(ctx, d, level, msg, append(attrs, slog.String("reason", why), millis("ack_timeout", h.opts.AckTimeout))...)
		return
	}
	status, err := r.Get(context.Background()) // ready: does not block
	if status == pubsub.AcknowledgeStatusSuccess && err == nil {
		return
	}
	msg, attrs := "idemgate: nack failed; the message is redelivered when its ack deadline passes", []slog.Attr(nil)
	if acked != "" {
		msg = "idemgate: ack failed; Pub/Sub will redeliver the message: " + redelivery(acked)
		attrs = append(attrs, slog.String("acked_outcome", string(acked)))
	}
	h.g.LogDelivery(ctx, d, slog.LevelWarn, msg, append(attrs, slog.String("ack_status", statusName(status)), slog.Any("error", err))...)
}

// statusName names an AcknowledgeStatus for log lines.
func statusName(s pubsub.AcknowledgeStatus) string {
	switch s {
	case pubsub.AcknowledgeStatusSuccess:
		return "success"
	case pubsub.AcknowledgeStatusPermissionDenied:
		return "permission_denied"
	case pubsub.AcknowledgeStatusFailedPrecondition:
		return "failed_precondition"
	case pubsub.AcknowledgeStatusInvalidAckID:
		return "invalid_ack_id"
	}
	return "other"
}

// millis is d as the log attribute name_ms, in milliseconds, as the
// gateway names every duration.
func millis(name string, d time.Duration) slog.Attr {
	return slog.Float64(name+"_ms", float64(d)/float64(time.Millisecond))
}
