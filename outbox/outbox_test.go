package outbox_test

import (
	"strings"
	"testing"

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
