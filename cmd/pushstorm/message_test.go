package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

func buildTest(t testing.TB, c config, seed uint64) []*message {
	t.Helper()
	msgs, err := buildMessages(c, rand.New(rand.NewPCG(seed, 1)), time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatalf("buildMessages: %v", err)
	}
	return msgs
}

func TestBuildMessagesOrders(t *testing.T) {
	c := testConfig("http://example.invalid/")
	c.N = 25
	c.OrderPrefix = "ord-"
	c.Attrs = map[string]string{"source": "pushstorm-test"}
	msgs := buildTest(t, c, 1)
	if got, want := len(msgs), 25; got != want {
		t.Fatalf("messages = %d, want %d (no republish asked)", got, want)
	}
	prev := int64(0)
	for i, m := range msgs {
		n := i + 1
		id, err := strconv.ParseInt(m.id, 10, 64)
		if err != nil || len(m.id) < 16 {
			t.Errorf("messageId %q is not a 16+ digit number like Pub/Sub's", m.id)
		}
		if id <= prev {
			t.Errorf("messageId %d not above the previous %d: ids must grow in publish order", id, prev)
		}
		prev = id
		var o order
		if err := json.Unmarshal(m.data, &o); err != nil {
			t.Fatalf("data %s is not an order: %v", m.data, err)
		}
		wantAttrs := map[string]string{
			"order_id": "ord-" + pad6(n),
			"po_id":    "po-" + strconv.Itoa(n%poGroups),
			"source":   "pushstorm-test",
		}
		if !maps.Equal(m.attrs, wantAttrs) {
			t.Errorf("message %d attributes = %v, want %v", n, m.attrs, wantAttrs)
		}
		if o.OrderID != wantAttrs["order_id"] || o.POID != wantAttrs["po_id"] {
			t.Errorf("message %d data %s disagrees with its attributes %v", n, m.data, m.attrs)
		}
	}
	if _, ok := c.Attrs["order_id"]; ok {
		t.Error("buildMessages wrote into the caller's -attr map")
	}
}

func pad6(n int) string {
	s := strconv.Itoa(n)
	for len(s) < 6 {
		s = "0" + s
	}
	return s
}

func TestBuildMessagesRepublish(t *testing.T) {
	c := testConfig("http://example.invalid/")
	c.N = 40
	c.Republish = 1
	msgs := buildTest(t, c, 2)
	if got, want := len(msgs), 80; got != want {
		t.Fatalf("messages = %d, want %d (every order republished once)", got, want)
	}
	type seen struct{ original, again int }
	byOrder := map[string]*seen{}
	ids := map[string]bool{}
	for _, m := range msgs {
		if ids[m.id] {
			t.Fatalf("messageId %s used twice: a republish must get a new id", m.id)
		}
		ids[m.id] = true
		s := byOrder[m.orderID]
		if s == nil {
			s = &seen{original: -1, again: -1}
			byOrder[m.orderID] = s
		}
		if m.republish {
			s.again = m.seq
		} else {
			s.original = m.seq
		}
	}
	for id, s := range byOrder {
		if s.original < 0 || s.again < 0 {
			t.Errorf("order %s: original at %d, republish at %d; want both", id, s.original, s.again)
		} else if s.again <= s.original {
			t.Errorf("order %s republished (seq %d) before its original (seq %d)", id, s.again, s.original)
		}
	}
}

func TestBuildMessagesChaosFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    float64
		want bool
	}{{"never", 0, false}, {"always", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig("http://example.invalid/")
			c.Dup, c.Concurrent = tc.p, tc.p
			for _, m := range buildTest(t, c, 3) {
				if m.dupAfterAck != tc.want || m.concurrentFirst != tc.want {
					t.Fatalf("message %s: dup=%v concurrent=%v with probability %v, want %v",
						m.id, m.dupAfterAck, m.concurrentFirst, tc.p, tc.want)
				}
			}
		})
	}
}

func TestBuildMessagesSeedReplays(t *testing.T) {
	c := testConfig("http://example.invalid/")
	c.N, c.Dup, c.Concurrent, c.Republish = 200, 0.3, 0.3, 0.3
	key := func(ms []*message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.id+m.orderID+strconv.FormatBool(m.dupAfterAck)+strconv.FormatBool(m.concurrentFirst)+string(m.data))
		}
		return out
	}
	a, b := key(buildTest(t, c, 42)), key(buildTest(t, c, 42))
	if !slices.Equal(a, b) {
		t.Error("the same seed built different storms; -seed must replay a run")
	}
	if slices.Equal(a, key(buildTest(t, c, 43))) {
		t.Error("different seeds built the same storm")
	}
}

func TestNewRequestWrapped(t *testing.T) {
	c := testConfig("http://example.invalid/orders")
	m := buildTest(t, c, 4)[6]
	req, err := newRequest(t.Context(), c, m, 3)
	if err != nil {
		t.Fatal(err)
	}
	if req.Method != "POST" || req.URL.String() != c.URL {
		t.Errorf("request = %s %s, want POST %s", req.Method, req.URL, c.URL)
	}
	if got := req.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	if got := req.Header.Get("User-Agent"); got != userAgent {
		t.Errorf("User-Agent = %q, want Pub/Sub's %q", got, userAgent)
	}
	body, _ := io.ReadAll(req.Body)

	// The exact field set of Pub/Sub's wrapped body.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	if got, want := slices.Sorted(maps.Keys(top)), []string{"deliveryAttempt", "message", "subscription"}; !slices.Equal(got, want) {
		t.Errorf("top-level fields = %v, want %v", got, want)
	}
	var inner map[string]any
	json.Unmarshal(top["message"], &inner)
	if got, want := slices.Sorted(maps.Keys(inner)), []string{"attributes", "data", "messageId", "message_id", "publishTime", "publish_time"}; !slices.Equal(got, want) {
		t.Errorf("message fields = %v, want %v", got, want)
	}

	var pb struct {
		Message struct {
			Data        string            `json:"data"`
			Attributes  map[string]string `json:"attributes"`
			MessageID   string            `json:"messageId"`
			MessageID2  string            `json:"message_id"`
			PublishTime string            `json:"publishTime"`
			Publish2    string            `json:"publish_time"`
		} `json:"message"`
		Subscription    string `json:"subscription"`
		DeliveryAttempt int    `json:"deliveryAttempt"`
	}
	if err := json.Unmarshal(body, &pb); err != nil {
		t.Fatal(err)
	}
	data, err := base64.StdEncoding.DecodeString(pb.Message.Data)
	if err != nil || !bytes.Equal(data, m.data) {
		t.Errorf("data decodes to %q (%v), want %q in standard base64", data, err, m.data)
	}
	if pb.Message.MessageID != m.id || pb.Message.MessageID2 != m.id {
		t.Errorf("messageId/message_id = %q/%q, want %q in both", pb.Message.MessageID, pb.Message.MessageID2, m.id)
	}
	pt, err := time.Parse(time.RFC3339Nano, pb.Message.PublishTime)
	if err != nil || !pt.Equal(m.publishTime) || pb.Message.Publish2 != pb.Message.PublishTime {
		t.Errorf("publishTime/publish_time = %q/%q, want %v in RFC 3339", pb.Message.PublishTime, pb.Message.Publish2, m.publishTime)
	}
	if !maps.Equal(pb.Message.Attributes, m.attrs) {
		t.Errorf("attributes = %v, want %v", pb.Message.Attributes, m.attrs)
	}
	if pb.Subscription != c.Subscription || pb.DeliveryAttempt != 3 {
		t.Errorf("subscription, deliveryAttempt = %q, %d; want %q, 3", pb.Subscription, pb.DeliveryAttempt, c.Subscription)
	}
}

func TestNewRequestUnwrapped(t *testing.T) {
	c := testConfig("http://example.invalid/")
	c.Form = formUnwrapped
	m := buildTest(t, c, 5)[0]
	req, err := newRequest(t.Context(), c, m, 2)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if !bytes.Equal(body, m.data) {
		t.Errorf("unwrapped body = %s, want the raw data %s", body, m.data)
	}
	for name, want := range map[string]string{
		"X-Goog-Pubsub-Message-Id":        m.id,
		"X-Goog-Pubsub-Subscription-Name": c.Subscription,
		"X-Goog-Pubsub-Publish-Time":      m.publishTime.Format(time.RFC3339Nano),
		"order_id":                        m.attrs["order_id"],
		"po_id":                           m.attrs["po_id"],
		"User-Agent":                      userAgent,
	} {
		if got := req.Header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
}
