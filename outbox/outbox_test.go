package outbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/outbox"
)

func TestChildKey(t *testing.T) {
	k := outbox.ChildKey("order-42 alice@example.com", "shipment")
	if k != outbox.ChildKey("order-42 alice@example.com", "shipment") {
		t.Fatal("ChildKey must be deterministic: the same on every attempt")
	}
	if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Errorf("ChildKey = %q, want 64 hex digits", k)
	}
	if strings.Contains(k, "alice") || strings.Contains(k, "order") {
		t.Errorf("ChildKey %q leaks the parent key", k)
	}
	// Pairs that concatenate alike must still differ.
	pairs := [][2]string{{"ab", "c"}, {"a", "bc"}, {"abc", ""}, {"", "abc"}, {"ab", "c "}, {"order-42 alice@example.com", "Shipment"}}
	seen := map[string][2]string{k: {"order-42 alice@example.com", "shipment"}}
	for _, p := range pairs {
		got := outbox.ChildKey(p[0], p[1])
		if q, dup := seen[got]; dup {
			t.Errorf("ChildKey%q = ChildKey%q: different pairs must give different keys", p, q)
		}
		seen[got] = p
	}
}

func TestPrepare(t *testing.T) {
	attrs := map[string]string{"a": "1"}
	msgs := []outbox.Message{
		{Topic: "orders", Data: []byte("x"), Attributes: attrs, OrderingKey: "k"},
		{Topic: "projects/p/topics/orders", Name: "second"},
	}
	got, err := outbox.Prepare("parent", msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"0", "second"} {
		ck := outbox.ChildKey("parent", name)
		if got[i].Name != name || got[i].ChildKey != ck || got[i].Attributes[outbox.ChildKeyAttribute] != ck {
			t.Errorf("message %d: name %q, child key %q, attribute %q; want %q and %q", i, got[i].Name, got[i].ChildKey, got[i].Attributes[outbox.ChildKeyAttribute], name, ck)
		}
	}
	if got[0].Attributes["a"] != "1" || got[0].OrderingKey != "k" || string(got[0].Data) != "x" {
		t.Errorf("Prepare lost the message's fields: %+v", got[0])
	}
	if len(attrs) != 1 || msgs[0].Name != "" || msgs[1].Attributes != nil {
		t.Errorf("Prepare modified the caller's messages: %+v, %v", msgs, attrs)
	}
}

func TestPrepareRefuses(t *testing.T) {
	long := strings.Repeat("x", 1025)
	for name, msgs := range map[string][]outbox.Message{
		"no topic":               {{}},
		"topic with a slash":     {{Topic: "a/b/c/d"}},
		"goog topic":             {{Topic: "goog-topic"}},
		"short topic":            {{Topic: "ab"}},
		"bad full name":          {{Topic: "projects//topics/orders"}},
		"goog attribute":         {{Topic: "orders", Attributes: map[string]string{"googx": "1"}}},
		"GOOG attribute":         {{Topic: "orders", Attributes: map[string]string{"GOOGx": "1"}}},
		"empty attribute name":   {{Topic: "orders", Attributes: map[string]string{"": "1"}}},
		"reserved attribute":     {{Topic: "orders", Attributes: map[string]string{outbox.ChildKeyAttribute: "forged"}}},
		"long attribute name":    {{Topic: "orders", Attributes: map[string]string{strings.Repeat("n", 257): "1"}}},
		"long attribute value":   {{Topic: "orders", Attributes: map[string]string{"a": long}}},
		"long ordering key":      {{Topic: "orders", OrderingKey: long}},
		"invalid UTF-8":          {{Topic: "orders", Attributes: map[string]string{"a": "\xff"}}},
		"name given twice":       {{Topic: "orders", Name: "a"}, {Topic: "orders", Name: "a"}},
		"name equal to position": {{Topic: "orders"}, {Topic: "orders", Name: "0"}},
		"large data":             {{Topic: "orders", Data: make([]byte, 10<<20+1)}},
	} {
		if _, err := outbox.Prepare("parent", msgs); err == nil {
			t.Errorf("%s: Prepare must refuse a message Pub/Sub would refuse, or a repeated name", name)
		}
	}
	if _, err := outbox.Prepare("", []outbox.Message{{Topic: "orders"}}); err == nil {
		t.Error("Prepare must refuse an empty parent key")
	}
	many := map[string]string{}
	for i := range 99 {
		many[strings.Repeat("a", i+1)] = "v"
	}
	if _, err := outbox.Prepare("p", []outbox.Message{{Topic: "orders", Attributes: many}}); err != nil {
		t.Errorf("99 attributes and the child key's make Pub/Sub's limit of 100: %v", err)
	}
	many["b"] = "v"
	if _, err := outbox.Prepare("p", []outbox.Message{{Topic: "orders", Attributes: many}}); err == nil {
		t.Error("100 attributes and the child key's are over Pub/Sub's limit: must be refused")
	}
}

// TestPrepareAcceptsPubSubsLimits: a message exactly at each of Pub/Sub's
// limits (an attribute name of 256 bytes, a value of 1024, an ordering key
// of 1024) is one Pub/Sub publishes, so Prepare must admit it.
func TestPrepareAcceptsPubSubsLimits(t *testing.T) {
	for name, m := range map[string]outbox.Message{
		"attribute name of 256 bytes":   {Topic: "orders", Attributes: map[string]string{strings.Repeat("n", 256): "1"}},
		"attribute value of 1024 bytes": {Topic: "orders", Attributes: map[string]string{"a": strings.Repeat("v", 1024)}},
		"ordering key of 1024 bytes":    {Topic: "orders", OrderingKey: strings.Repeat("k", 1024)},
	} {
		if _, err := outbox.Prepare("parent", []outbox.Message{m}); err != nil {
			t.Errorf("%s: Prepare = %v; Pub/Sub publishes it", name, err)
		}
	}
}

// TestPrepareRefusesWhatTheClientRefuses holds Prepare's size check to the
// Pub/Sub client's own: a message Prepare admits is published, and one a
// byte larger, which the client would refuse on every try, fails the
// body's transaction instead of blocking its ordering key in the outbox.
func TestPrepareRefusesWhatTheClientRefuses(t *testing.T) {
	ctx := t.Context()
	const project = "a-project-id-of-thirty-chars-x" // the longest a project ID is
	_, client := fakepubsub.NewProject(t, project)
	if outbox.MaxPublishRequestBytes != pubsub.MaxPublishRequestBytes {
		t.Fatalf("outbox.MaxPublishRequestBytes = %d, the client's is %d", outbox.MaxPublishRequestBytes, int(pubsub.MaxPublishRequestBytes))
	}
	buf := make([]byte, pubsub.MaxPublishRequestBytes+1)
	for _, topic := range []string{"orders", "projects/" + project + "/topics/orders"} {
		msg := func(n int) outbox.Message {
			return outbox.Message{Topic: topic, Data: buf[:n], Attributes: map[string]string{"kind": "invoice"}, OrderingKey: "customer-7"}
		}
		// The old check admitted data up to 10 MiB: this one must be refused.
		if _, err := outbox.Prepare("parent", []outbox.Message{msg(pubsub.MaxPublishRequestBytes)}); err == nil {
			t.Errorf("topic %q: a message of %d data bytes is over the client's request limit and must be refused", topic, int(pubsub.MaxPublishRequestBytes))
		}
		// The largest message Prepare admits.
		largest := int(pubsub.MaxPublishRequestBytes)
		for ; largest > pubsub.MaxPublishRequestBytes-300; largest-- {
			if _, err := outbox.Prepare("parent", []outbox.Message{msg(largest)}); err == nil {
				break
			}
		}
		ps, err := outbox.Prepare("parent", []outbox.Message{msg(largest)})
		if err != nil {
			t.Fatalf("topic %q: Prepare refuses every message within 300 bytes of the limit: %v", topic, err)
		}
		pub := client.Publisher("projects/" + project + "/topics/orders")
		pub.EnableMessageOrdering = true
		// pstest takes no request over gRPC's 4 MiB: only whether the
		// client refused the message itself matters here.
		pub.PublishSettings.Timeout = time.Second
		for _, n := range []int{largest, largest + 1} {
			_, err = pub.Publish(ctx, &pubsub.Message{Data: buf[:n], Attributes: ps[0].Attributes, OrderingKey: "customer-7"}).Get(ctx)
			oversized := errors.Is(err, pubsub.ErrOversizedMessage)
			if n == largest && oversized {
				t.Errorf("topic %q: the client refuses as oversized a message of %d data bytes that Prepare admits", topic, n)
			}
			if n > largest && !oversized {
				t.Errorf("topic %q: the client publishes %d data bytes (%v) but Prepare refuses them: the check is stricter than the client", topic, n, err)
			}
			pub.ResumePublish("customer-7")
		}
		pub.Stop()
	}
}

// TestOrderKey: one topic spelled two ways is one order; the ordering key
// and the topic ID both count.
func TestOrderKey(t *testing.T) {
	k := outbox.OrderKey("orders", "customer-7")
	if k != outbox.OrderKey("projects/p-1/topics/orders", "customer-7") {
		t.Error("a topic ID and its full name must give one order key")
	}
	if outbox.OrderKey("orders", "") != "" {
		t.Error("a message without an ordering key has no order key")
	}
	for _, other := range [][2]string{{"orders", "customer-8"}, {"order", "scustomer-7"}, {"projects/p-1/topics/invoices", "customer-7"}} {
		if outbox.OrderKey(other[0], other[1]) == k {
			t.Errorf("OrderKey%q equals the key of (orders, customer-7)", other)
		}
	}
	if got := outbox.TopicID("projects/p-1/topics/orders"); got != "orders" {
		t.Errorf("TopicID = %q, want orders", got)
	}
}
