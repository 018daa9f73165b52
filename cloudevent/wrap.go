package cloudevent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// Options configures Wrap. The zero value means the defaults; Wrap copies
// it, so the caller may reuse it.
type Options struct {
	// Route is the function's route settings over the Gateway's (see
	// gateway.RouteOptions). Its key function sees each event's message: the
	// decoded Pub/Sub message of a messagePublished event, or, for any other
	// event, a message holding the event's id, source and data, with no
	// attributes and a zero Form. Its Key defaults to KeyFromEvent, whatever
	// the Gateway's Options.Key.
	Route gateway.RouteOptions

	// Platform names what delivers the events, for the answers that end a
	// delivery (see Platform). Default Eventarc.
	Platform Platform

	// Logger receives the guard's line for each event (docs/operations.md,
	// "Log lines"). Default: the gateway's logger.
	Logger *slog.Logger
}

// Wrap returns a CloudEvent function that runs fn at most once per key,
// under g's Lock with the route's settings of Options.Route. Register it
// with functions.CloudEvent (functions-framework-go), or hand it to a
// CloudEvents SDK receiver.
//
// For a Pub/Sub event (type [pushenvelope.MessagePublishedType]) Wrap decodes
// the data into a [pushenvelope.Message], which fn finds with
// [pushenvelope.FromContext]; its Form is CloudEventBinary whatever the
// mode (the SDK does not say). The claim is in the context too
// ([gateway.ClaimFromContext]).
//
// fn's result is the verdict: nil, or a result functions-framework answers
// with a 2xx (a *cehttp.Result with code 204, say), records the key as
// done; anything else releases the claim and is returned unchanged. A
// panic in fn releases the claim and goes on (functions-framework answers
// 500).
//
// Wrap panics if g or fn is nil, or Options.Platform is unknown.
func Wrap(g *gateway.Gateway, fn func(context.Context, event.Event) error, opts *Options) func(context.Context, event.Event) error {
	if g == nil {
		panic("cloudevent: Wrap with a nil *gateway.Gateway")
	}
	if fn == nil {
		panic("cloudevent: Wrap with a nil function")
	}
	w := &wrapper{fn: fn}
	if opts != nil {
		w.opts = *opts
	}
	if w.opts.Route.Key == nil {
		w.opts.Route.Key = KeyFromEvent
	}
	w.g = g.Route(&w.opts.Route)
	if w.opts.Platform != Eventarc && w.opts.Platform != EventarcAdvanced {
		panic("cloudevent: Wrap with an unknown Options.Platform " + w.opts.Platform.String())
	}
	return w.serve
}

// wrapper is the state of one Wrap call. It is read-only after Wrap, so
// safe for concurrent use.
type wrapper struct {
	g    *gateway.Gateway
	fn   func(context.Context, event.Event) error
	opts Options
}

func (w *wrapper) serve(ctx context.Context, e event.Event) error {
	// A Pub/Sub event: decode its message once, for the key and for fn.
	// Any other event stands as a message of its own for the key function.
	d := gateway.Delivery{Form: "cloudevent", Logger: w.opts.Logger, EventType: e.Type()}
	if e.Type() == pushenvelope.MessagePublishedType {
		m, err := pushenvelope.FromMessagePublishedData(e.ID(), e.Source(), e.Data())
		if err != nil {
			m, d.Invalid = &pushenvelope.Message{ID: e.ID(), Source: e.Source()}, fmt.Errorf("event data is not a Pub/Sub message: %w", err)
		}
		ctx = pushenvelope.NewContext(ctx, m)
		d.Message = m
	} else {
		d.Message = &pushenvelope.Message{ID: e.ID(), Data: e.Data(), Source: e.Source(), Attributes: map[string]string{}}
	}

	// fn's own result goes back to the framework unchanged whenever fn ran.
	var result error
	res := w.g.Deliver(ctx, &d, func(ctx context.Context) error {
		result = w.fn(ctx, e)
		switch {
		case acknowledged(result):
			return nil
		case w.opts.Platform.ends(result):
			// The pipeline will not deliver the event again: its failure is
			// final, and the record goes FAILED, where idemgate failed
			// lists it, rather than only released.
			return gateway.Permanent(result)
		}
		return result
	})
	return reply(&d, &res, result, w.opts.Platform)
}

// reply is the CloudEvents surface's table: the outcome of an event as the
// result functions-framework answers (nil or a 2xx result acks, anything
// else nacks; on Eventarc Advanced, only 408, 409, 429, 500, 502, 503 and 504
// are retried). result is fn's, when it ran.
func reply(d *gateway.Delivery, res *gateway.Result, result error, p Platform) error {
	if res.Panic != nil {
		panic(res.Panic) // the claim is released; functions-framework answers 500
	}
	switch res.Outcome {
	case gateway.OutcomeRejected:
		return withStatus(http.StatusBadRequest, "idemgate: "+res.Err.Error(), res.Err)
	case gateway.OutcomeDuplicate:
		return nil
	case gateway.OutcomeConflict:
		if d.AcceptConflicts {
			return nil
		}
		return withStatus(p.permanent(http.StatusConflict), "idemgate: key reused for a different payload", res.Err)
	case gateway.OutcomeInProgress:
		return withStatus(http.StatusServiceUnavailable, "idemgate: in progress elsewhere; retry later", res.Err)
	case gateway.OutcomeAlreadyFailed, gateway.OutcomeAbandoned:
		if d.AckFailed {
			return nil
		}
		if _, own := errors.AsType[*cehttp.Result](result); own && res.Ran {
			return result // the function's own failure status
		}
		return withStatus(http.StatusUnprocessableEntity, "idemgate: the work for this key failed for good; refused until retried", res.Err)
	case gateway.OutcomeNoKey:
		return withStatus(p.permanent(http.StatusInternalServerError), "idemgate: no idempotency key", res.Err)
	case gateway.OutcomeStoreError:
		return withStatus(http.StatusServiceUnavailable, "idemgate: store unavailable", res.Err)
	case gateway.OutcomeCancelled:
		return withStatus(http.StatusServiceUnavailable, "idemgate: the request ended before its key was claimed", res.Err)
	case gateway.OutcomeFencedOut:
		if !acknowledged(result) {
			return nil // fn's transaction was fenced out on a DONE record: nothing written, the work is done
		}
	case gateway.OutcomeFailed:
		if acknowledged(result) {
			// fn answered success, but the guard failed the delivery: it
			// lost its lease while fn ran, or its fenced-out transaction
			// left nobody to do the work. Not an ack.
			return withStatus(http.StatusInternalServerError, "idemgate: the work did not hold its key to the end; retry", res.Err)
		}
	}
	return result // fn ran: nil, its acknowledging result, or its failure
}
