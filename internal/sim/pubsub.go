package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/idemgate/idemgate/internal/pulltest"
	"github.com/idemgate/idemgate/pushenvelope"
)

// The names the simulated deliveries carry.
const (
	subscription = "projects/sim/subscriptions/orders"
	eventSource  = "//pubsub.googleapis.com/projects/sim/topics/orders"
)

var publishTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// publish is Pub/Sub for one message: it delivers the message until an
// attempt is acked, and dead-letters it after its last attempt.
func (w *world) publish(ms *msgState) {
	defer w.all.Done()
	if !w.sleep(w.publishAt(ms.m)) {
		return
	}
	backoff := w.t.minBackoff()
	for n := 1; n <= w.t.maxAttempts(); n++ {
		a := drawAttempt(w.sc, w.t, ms.m, n, false)
		if a.Forged != forgedNone {
			w.forge(ms, a)
		}
		d, answer := w.deliver(ms, a)
		if a.copy != nil {
			w.all.Add(1)
			go func() {
				defer w.all.Done()
				if w.sleep(a.CopyAfter) && !ms.isSettled(w) {
					w.deliver(ms, a.copy)
				}
			}()
		}
		deadline := time.NewTimer(w.t.ackDeadline())
		select {
		case <-answer:
		case <-deadline.C:
			w.mu.Lock()
			d.late = true
			w.mu.Unlock()
			w.tracef(d, "pubsub: no answer within the ack deadline; redelivering")
			backoff = 0 // the deadline was the wait
		case <-ms.settled:
		case <-w.end:
		}
		deadline.Stop()
		if ms.isSettled(w) || !w.sleep(backoff) || ms.isSettled(w) {
			return
		}
		backoff = min(max(2*backoff, w.t.minBackoff()), w.t.maxBackoff())
	}
	w.mu.Lock()
	if !ms.acked {
		ms.dead = true
		close(ms.settled)
	}
	w.mu.Unlock()
	w.tracef(nil, "pubsub: message %s dead-lettered after %d attempts", ms.m.ID, w.t.maxAttempts())
}

func (ms *msgState) isSettled(w *world) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return ms.acked || ms.dead
}

// deliver sends attempt a of ms to its process. The returned channel
// receives true (ack) or false (nack) when the process answers; it
// receives nothing when the process crashed first.
func (w *world) deliver(ms *msgState, a *Attempt) (*delivery, <-chan bool) {
	p := w.process(a.Instance)
	d := &delivery{w: w, ms: ms, a: a, proc: p, start: time.Now()}
	ctx, cancel := context.WithCancel(withDelivery(w.root, d))
	w.mu.Lock()
	if !a.Copy {
		ms.attempts = append(ms.attempts, d)
	}
	p.inflt[d] = true
	w.inflight[ms.key]++
	w.begun[ms.key]++
	if a.excusesRepeat(w.sc, w.t) {
		w.key(ms.key).excused = true
	}
	w.mu.Unlock()
	w.tracef(d, "pubsub: deliver %s", a)
	answer := make(chan bool, 1)
	w.live.Add(1)
	w.all.Add(1)
	go func() {
		defer w.all.Done()
		defer d.leave.Do(w.live.Done)
		defer cancel()
		// The client hangs up at the ack deadline.
		w.all.Add(1)
		go func() {
			defer w.all.Done()
			t := time.NewTimer(w.t.ackDeadline())
			defer t.Stop()
			select {
			case <-t.C:
				cancel()
			case <-ctx.Done():
			}
		}()
		acked, how := w.drive(ctx, d)
		w.mu.Lock()
		delete(p.inflt, d)
		w.inflight[ms.key]--
		d.answer, d.acked = true, acked
		w.mu.Unlock()
		if p.crashed() {
			// A crash took the answer: a real failure of the attempt,
			// whatever its body did.
			w.mu.Lock()
			d.struck = true
			w.mu.Unlock()
			w.tracef(d, "answer %s lost: process %d crashed", how, p.id)
			return
		}
		w.answered(d, acked, how)
		answer <- acked
	}()
	return d, answer
}

// drive hands d to its surface and reports whether the answer acks, and
// the answer as the trace shows it.
func (w *world) drive(ctx context.Context, d *delivery) (acked bool, how string) {
	m := d.ms.m
	switch d.a.Surface {
	case surfacePush, surfaceIdempotent:
		h := d.proc.push
		if d.a.Surface == surfaceIdempotent {
			h = d.proc.idem
			if w.sc.Auth {
				h = d.proc.auth
			}
		}
		body, err := json.Marshal(map[string]any{"message": w.wireMessage(m), "subscription": subscription, "deliveryAttempt": d.a.N})
		if err != nil {
			panic(err)
		}
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if w.sc.Auth && d.a.Surface == surfaceIdempotent {
			req.Header.Set("Authorization", "Bearer "+genuineToken)
		}
		rec := httptest.NewRecorder()
		if aborted := w.serve(d, h, rec, req); aborted != "" {
			return false, aborted
		}
		if !is2xx(rec.Code) {
			w.noteText(d, "the answer's body", errors.New(rec.Body.String()))
		}
		return is2xx(rec.Code), http.StatusText(rec.Code) + " (" + itoa(rec.Code) + ")"
	case surfaceCloudEvent:
		e := event.New()
		e.SetID(m.ID)
		e.SetType(pushenvelope.MessagePublishedType)
		e.SetSource(eventSource)
		if err := e.SetData(event.ApplicationJSON, map[string]any{"message": w.wireMessage(m), "subscription": subscription}); err != nil {
			panic(err)
		}
		var res error
		func() {
			defer func() {
				if p := recover(); p != nil {
					res = errors.New("panic") // functions-framework answers 500
				}
			}()
			res = d.proc.ce(ctx, e)
		}()
		if res == nil {
			return true, "nil"
		}
		w.noteText(d, "the CloudEvents result", res)
		return ceAcknowledged(res), res.Error()
	default: // pull
		acks := &ackRecorder{}
		pm := newPullMessage(w.b.Prefix+m.ID, m, w.attributes(m), d.a.N, acks)
		// Receive's context: the callback's, which a planned stop cancels.
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		w.mu.Lock()
		d.stopRecv = stop
		w.mu.Unlock()
		if d.a.Stop > 0 && !d.a.StopAtClaim {
			w.all.Add(1)
			go func() {
				defer w.all.Done()
				t := time.NewTimer(d.a.Stop)
				defer t.Stop()
				select {
				case <-t.C:
					w.stopReceive(d)
				case <-rctx.Done():
				}
			}()
		}
		func() {
			defer func() { recover() }() // the panic of a Receive callback, after its nack
			d.proc.pull(rctx, pm)
		}()
		v := acks.Verdict()
		return v == "Ack", v
	}
}

// serve hands req to the push handler h as net/http would: a panic with
// http.ErrAbortHandler cuts the connection, which Pub/Sub takes for a
// nack, and serve then returns how the answer went; any other panic out of
// the library breaks a rule (the surface documents none).
func (w *world) serve(d *delivery, h http.Handler, rec *httptest.ResponseRecorder, req *http.Request) (aborted string) {
	defer func() {
		if p := recover(); p != nil {
			aborted = "connection aborted"
			if p != http.ErrAbortHandler {
				w.violate(d, rulePanic, fmt.Sprintf("the push handler let a panic out: %v", p))
			}
		}
	}()
	h.ServeHTTP(rec, req)
	return ""
}

func is2xx(code int) bool { return code >= 200 && code <= 299 }

// wireMessage is m as the message object of a push body and of
// messagePublished data.
func (w *world) wireMessage(m *Message) map[string]any {
	return map[string]any{
		"data":        base64.StdEncoding.EncodeToString([]byte(m.Data)),
		"messageId":   w.b.Prefix + m.ID,
		"publishTime": publishTime.Format(time.RFC3339Nano),
		"attributes":  w.attributes(m),
	}
}

func (w *world) attributes(m *Message) map[string]string {
	return map[string]string{"order_id": w.b.Prefix + m.Order, "customer_id": w.b.Prefix + m.Customer}
}

// ceAcknowledged is what the CloudEvents SDK makes of a function's result:
// an ack below 300, as cloudevent documents.
func ceAcknowledged(r error) bool {
	var res *cehttp.Result
	if errors.As(r, &res) {
		return res.StatusCode < 300 || res.StatusCode >= 600
	}
	return protocol.IsACK(r)
}

// ackRecorder notes a pulled message's first Ack or Nack.
type ackRecorder = pulltest.Acks

// newPullMessage returns a received message whose Ack and Nack go to acks.
func newPullMessage(id string, m *Message, attrs map[string]string, attempt int, acks *ackRecorder) *pubsub.Message {
	pm, err := pulltest.Message(&pubsub.Message{ID: id, Data: []byte(m.Data), Attributes: attrs, PublishTime: publishTime, DeliveryAttempt: &attempt, OrderingKey: m.OrderingKey}, acks)
	if err != nil {
		panic("sim: " + err.Error())
	}
	return pm
}
