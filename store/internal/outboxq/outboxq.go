// Package outboxq holds the rules the Google stores' outboxes share: which
// messages a Take reads again in its transaction, and which of those it
// takes. The stores keep the queries and the transactions.
package outboxq

import (
	"time"

	"github.com/idemgate/idemgate/outbox"
)

// Head is a message as a Take's query found it.
type Head struct {
	ID, Topic, OrderingKey string
}

// Plan returns the IDs of the messages a Take reads in its transaction, at
// most limit, in order: the due candidates cands (oldest first), where a
// candidate with an ordering key stands for the first messages of its
// topic and key, which first returns (their IDs, oldest first). Those may
// not be candidates themselves: one may be held by another Take.
func Plan(cands []Head, limit int, first func(topic, orderingKey string) ([]string, error)) ([]string, error) {
	var ids []string
	chosen := map[string]bool{}
	add := func(id string) {
		if !chosen[id] && len(ids) < limit {
			chosen[id] = true
			ids = append(ids, id)
		}
	}
	seen := map[[2]string]bool{}
	for _, c := range cands {
		if c.OrderingKey == "" {
			add(c.ID)
			continue
		}
		k := [2]string{c.Topic, c.OrderingKey}
		if seen[k] {
			continue
		}
		seen[k] = true
		firsts, err := first(c.Topic, c.OrderingKey)
		if err != nil {
			return nil, err
		}
		for _, id := range firsts {
			add(id)
		}
	}
	return ids, nil
}

// Msg is a message as a Take's transaction read it.
type Msg struct {
	Topic, OrderingKey string
	Due                time.Time // when a Take may take it
}

// Pick returns the indexes of the messages of msgs (in Plan's order; nil
// for one that is gone) that a Take takes at now: each due one, but none
// of an ordering key after one of that key that is not due, so that a
// held message keeps the later ones of its key behind it.
func Pick(msgs []*Msg, now time.Time) []int {
	var out []int
	blocked := map[[2]string]bool{}
	for i, m := range msgs {
		if m == nil {
			continue
		}
		k := [2]string{m.Topic, m.OrderingKey}
		if blocked[k] {
			continue
		}
		if m.Due.After(now) {
			if m.OrderingKey != "" {
				blocked[k] = true
			}
			continue
		}
		out = append(out, i)
	}
	return out
}

// Stored is an outgoing message as both stores keep it.
type Stored struct {
	Name        string // the name its child key was derived from
	Topic       string
	Data        []byte
	Attributes  map[string]string // the child key's included
	OrderingKey string
	Enqueued    time.Time // when its transaction queued it, a microsecond apart per message
	Due         time.Time // when a Take may take it
	Token       string    // the Take that holds it; "" before any
}

// Queued returns the messages of ps, prepared by [outbox.Prepare], as a
// transaction stores them at now: due at once, and enqueued a microsecond
// apart (the stores keep microseconds), so that a relay publishes them in
// their order.
func Queued(ps []outbox.Pending, now time.Time) []Stored {
	out := make([]Stored, len(ps))
	for i, p := range ps {
		out[i] = Stored{
			Name: p.Name, Topic: p.Topic, Data: p.Data, Attributes: p.Attributes,
			OrderingKey: p.OrderingKey, Enqueued: now.Add(time.Duration(i) * time.Microsecond), Due: now,
		}
	}
	return out
}

// Pending returns m, stored under its child key, as a Take with token
// hands it out at now.
func (m *Stored) Pending(childKey, token string, now time.Time) outbox.Pending {
	return outbox.Pending{
		Message: outbox.Message{
			Topic: m.Topic, Data: m.Data, Attributes: m.Attributes,
			OrderingKey: m.OrderingKey, Name: m.Name,
		},
		ChildKey: childKey,
		ID:       childKey,
		Token:    token,
		Waited:   max(now.Sub(m.Enqueued), 0),
	}
}
