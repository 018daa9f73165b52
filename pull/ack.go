package pull

import (
	"context"
	"log/slog"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/internal/guard"
)

// ack acknowledges m and, on a subscription with exactly-once delivery,
// waits for Pub/Sub to accept it. A failed ack is harmless to correctness:
// the key is already recorded (done, or done earlier), so the redelivery it
// causes is answered as a duplicate. It is logged because it costs a
// delivery and may point at ack deadlines that are too short.
func (h *handler) ack(ctx context.Context, m *pubsub.Message, d *guard.Delivery) {
	if h.opts.AckTimeout < 0 {
		m.Ack()
		return
	}
	h.await(ctx, m, d, m.AckWithResult(), true)
}

// nack asks Pub/Sub to redeliver m. A failed nack only delays the retry: the
// message comes back when its ack deadline passes.
func (h *handler) nack(ctx context.Context, m *pubsub.Message, d *guard.Delivery) {
	if h.opts.AckTimeout < 0 {
		m.Nack()
		return
	}
	h.await(ctx, m, d, m.NackWithResult(), false)
}

// await waits up to AckTimeout for r, and logs anything but success.
// Without exactly-once delivery r is ready at once.
func (h *handler) await(ctx context.Context, m *pubsub.Message, d *guard.Delivery, r *pubsub.AckResult, isAck bool) {
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
		msg := "idemgate: ack not confirmed; if it was lost, Pub/Sub redelivers the message and the gateway answers duplicate"
		if !isAck {
			msg = "idemgate: nack not confirmed; the message is redelivered at the latest when its ack deadline passes"
		}
		guard.Log(h.g, ctx, d, level, msg, slog.String("reason", why), slog.Duration("ack_timeout", h.opts.AckTimeout))
		return
	}
	status, err := r.Get(context.Background()) // ready: does not block
	if status == pubsub.AcknowledgeStatusSuccess && err == nil {
		return
	}
	msg := "idemgate: ack failed; Pub/Sub will redeliver the message and the gateway will answer duplicate"
	if !isAck {
		msg = "idemgate: nack failed; the message is redelivered when its ack deadline passes"
	}
	guard.Log(h.g, ctx, d, slog.LevelWarn, msg, slog.String("ack_status", statusName(status)), slog.Any("error", err))
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
