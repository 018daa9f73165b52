package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// userAgent is what Pub/Sub push puts in User-Agent.
const userAgent = "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)"

// poGroups is how many purchase orders the orders are spread over: order i
// carries po_id po-(i%poGroups), so /po-updates sees contention.
const poGroups = 10

// message is one published Pub/Sub message. An order normally has one; a
// producer republish gives it a second, with a new messageId.
//
// The chaos decisions are drawn when the messages are built, from the seeded
// source, so a seed replays the same storm whatever the timing.
type message struct {
	seq         int    // position in publish order
	id          string // messageId, numeric like the real ones
	orderID     string
	data        []byte
	attrs       map[string]string
	publishTime time.Time
	republish   bool // a producer's second publish of orderID

	dupAfterAck     bool // the first ack is lost, so Pub/Sub delivers again
	concurrentFirst bool // attempt 1 goes out as two simultaneous copies
}

// order is the JSON data of each message.
type order struct {
	OrderID string  `json:"order_id"`
	POID    string  `json:"po_id"`
	Amount  float64 `json:"amount"`
}

// buildMessages publishes c.N orders, plus the republishes, in publish order.
// A republish lands a short random distance after its original, so it is often
// in flight at the same time.
func buildMessages(c config, rng *rand.Rand, start time.Time) ([]*message, error) {
	type pending struct {
		at  float64 // sort key: publish position
		msg *message
	}
	var all []pending
	for i := 1; i <= c.N; i++ {
		o := order{
			OrderID: orderID(c.OrderPrefix, i),
			POID:    fmt.Sprintf("po-%d", i%poGroups),
			Amount:  float64(rng.IntN(100_000)) / 100,
		}
		data, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("encode order %s: %w", o.OrderID, err)
		}
		attrs := maps.Clone(c.Attrs)
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs["order_id"] = o.OrderID
		attrs["po_id"] = o.POID
		all = append(all, pending{at: float64(i), msg: &message{orderID: o.OrderID, data: data, attrs: attrs}})
		if rng.Float64() < c.Republish {
			again := &message{orderID: o.OrderID, data: data, attrs: attrs, republish: true}
			gap := 1 + rng.IntN(2*c.Concurrency)
			all = append(all, pending{at: float64(i+gap) + 0.5, msg: again})
		}
	}
	slices.SortStableFunc(all, func(a, b pending) int { return cmp.Compare(a.at, b.at) })

	// Real messageIds are 16-17 digit decimals that grow over time.
	base := 1_000_000_000_000_000 + rng.Int64N(8_000_000_000_000_000)
	msgs := make([]*message, len(all))
	for seq, p := range all {
		m := p.msg
		m.seq = seq
		m.id = strconv.FormatInt(base+int64(seq), 10)
		m.publishTime = start.Add(time.Duration(seq) * time.Microsecond).UTC()
		m.dupAfterAck = rng.Float64() < c.Dup
		m.concurrentFirst = rng.Float64() < c.Concurrent
		msgs[seq] = m
	}
	return msgs, nil
}

// pushBody is Pub/Sub's wrapped push body. The message carries both the
// camelCase and the snake_case spellings, as the real service sends them.
type pushBody struct {
	Message         pushMessage `json:"message"`
	Subscription    string      `json:"subscription"`
	DeliveryAttempt int         `json:"deliveryAttempt,omitempty"`
}

type pushMessage struct {
	Data         []byte            `json:"data"` // standard base64 in JSON
	Attributes   map[string]string `json:"attributes,omitempty"`
	MessageID    string            `json:"messageId"`
	MessageIDAlt string            `json:"message_id"`
	PublishTime  string            `json:"publishTime"`
	PublishAlt   string            `json:"publish_time"`
}

// The metadata headers of an unwrapped push with write-metadata on.
const (
	hdrMessageID    = "X-Goog-Pubsub-Message-Id"
	hdrSubscription = "X-Goog-Pubsub-Subscription-Name"
	hdrPublishTime  = "X-Goog-Pubsub-Publish-Time"
)

// newRequest builds delivery attempt number attempt (from 1) of m, in the
// subscription's form. The deliveryAttempt field exists only in the wrapped
// form, as with a dead-letter policy on the subscription.
func newRequest(ctx context.Context, c config, m *message, attempt int) (*http.Request, error) {
	published := m.publishTime.Format(time.RFC3339Nano)
	var body []byte
	if c.Form == formUnwrapped {
		body = m.data
	} else {
		var err error
		body, err = json.Marshal(pushBody{
			Message: pushMessage{
				Data:         m.data,
				Attributes:   m.attrs,
				MessageID:    m.id,
				MessageIDAlt: m.id,
				PublishTime:  published,
				PublishAlt:   published,
			},
			Subscription:    c.Subscription,
			DeliveryAttempt: attempt,
		})
		if err != nil {
			return nil, fmt.Errorf("encode message %s: %w", m.id, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	if c.Form == formUnwrapped {
		for k, v := range m.attrs {
			req.Header.Set(k, v)
		}
		req.Header.Set(hdrMessageID, m.id)
		req.Header.Set(hdrSubscription, c.Subscription)
		req.Header.Set(hdrPublishTime, published)
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}
